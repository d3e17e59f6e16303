#!/usr/bin/python3
"""Writes a real-shape MiniMax-M2 slice with all 256 experts in MXFP4 (AMD Quark layout), ~4.1 GB.

The bench checkpoint for the MXFP4 path at the real per-layer shapes: hidden 3072, 48 query / 8 kv
heads of 128 (rotary 64), 256 experts of intermediate 1536, top-8 sigmoid routing with
e_score_correction_bias, per-layer q/k norm, 2 layers, vocab 8192. A bf16 intermediate would be
14.5 GB, so the expert tensors are written directly as MXFP4 and streamed tensor by tensor (memory
stays at a few tens of MB):

  experts    U8 packed e2m1 `.weight` [out, in/2] + U8 e8m0 `.weight_scale` [out, in/32], exactly
             the layout and quantization_config of tools/quantize.py --format mxfp4 (attention,
             router and lm_head excluded, so bf16).
  the rest   gen_checkpoint.py's tensors and values for the same (seed, name): bf16 attention,
             norms, embedding, lm_head; bf16 router N(0, 4/in); F32 routing bias N(0, 0.001)
             (--bias-std; gen_checkpoint.py defaults to 0.1).

Realistic codes without the bf16 weights: for each input dim (3072 for w1/w3, 1536 for w2) a
calibration sample N(0, 1/in) -- gen_checkpoint.py's projection scale -- goes through
quantize.py's own MXFP4 quantizer; the scale bytes and the e2m1 nibbles of every expert matrix are
then drawn from those empirical distributions (scale byte per group, then its nibbles from the
nibble distribution of groups with that scale byte; inverse CDF on 16-bit uniforms).
The dequantized weights therefore have gen_checkpoint's scale (std within ~2% of 1/sqrt(in),
printed), scale bytes around 127-7, and the code histogram of a quantized Gaussian. What is lost
is only the within-group correlation (the largest code of a group is not forced to 4 or 6), which
neither speed nor numerical sanity depends on. Deterministic per (seed, name), independent of the
shard count.
"""

import argparse
import json
import os
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_checkpoint  # noqa: E402
import quantize  # noqa: E402
import st_io  # noqa: E402

E2M1_SIGNED = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6])


def rng_for(seed, name):
    return np.random.Generator(np.random.PCG64((seed * 1_000_003 + zlib.crc32(name.encode()))
                                               % (2**63)))


def inverse_cdf_table(counts):
    """counts over symbols -> uint8 table [65536]: symbol for each 16-bit uniform (inverse CDF)."""
    cdf = np.cumsum(counts, dtype=np.float64) / counts.sum()
    u = (np.arange(65536) + 0.5) / 65536
    return np.minimum(np.searchsorted(cdf, u, side="right"), len(counts) - 1).astype(np.uint8)


class Calibration:
    """Empirical MXFP4 scale-byte and nibble distributions of quantize.py on N(0, 1/in) rows."""

    def __init__(self, inn, seed, rows=256):
        w = rng_for(seed, f"calibration.{inn}").standard_normal((rows, inn)).astype(np.float32)
        w *= np.float32(1 / inn**0.5)
        packed, scales = quantize.mxfp4_quantize(w)
        self.scale_table = inverse_cdf_table(np.bincount(scales.ravel(), minlength=256))
        # Nibbles conditioned on their group's scale byte: a group with a smaller scale holds
        # larger codes, and drawing both independently would inflate the std (~17% for in=1536).
        codes = np.stack([packed & 15, packed >> 4], -1).reshape(rows, -1, 32)
        self.nibble_tables = np.zeros((256, 65536), np.uint8)
        for b in np.unique(scales):
            self.nibble_tables[b] = inverse_cdf_table(np.bincount(codes[scales == b].ravel(),
                                                                  minlength=16))
        self.nibble_tables = self.nibble_tables.ravel()
        self.target_std = 1 / inn**0.5
        self.quantized_std = float(dequantize(packed, scales).std())

    def draw(self, rng, out, inn):
        scales = self.scale_table[rng.integers(0, 65536, size=(out, inn // 32), dtype=np.uint16)]
        u = rng.integers(0, 65536, size=(out, inn // 32, 32), dtype=np.uint16)
        index = (scales.astype(np.uint32) << 16)[..., None] | u  # row of the scale's table
        nib = self.nibble_tables[index].reshape(out, inn)
        packed = nib[:, 0::2] | (nib[:, 1::2] << 4)
        return np.ascontiguousarray(packed), scales


def dequantize(packed, scales):
    out = packed.shape[0]
    codes = np.stack([packed & 15, packed >> 4], -1).reshape(out, -1)
    vals = E2M1_SIGNED[codes].reshape(out, -1, 32)
    return (vals * np.ldexp(1.0, scales.astype(np.int64) - 127)[..., None]).reshape(out, -1)


def build_specs(a):
    """[(name, dtype, shape)] plus {weight or scale name: (weight name, out, in)} of the experts."""
    specs, experts = [], {}
    targets, exclude = quantize.plan(gen_checkpoint.build_config(a), "mxfp4")
    for name, dtype, shape, _ in gen_checkpoint.tensor_specs(a):
        if name not in targets:
            specs.append((name, dtype, shape))
            continue
        out, inn = targets[name]
        scale = quantize.scale_name(name, "mxfp4")
        specs += [(name, "U8", (out, inn // 2)), (scale, "U8", (out, inn // 32))]
        experts[name] = experts[scale] = (name, out, inn)
    return specs, experts, exclude


def nbytes(spec):
    return st_io._DTYPES[spec[1]][1] * int(np.prod(spec[2], dtype=np.int64))


def write_slice(a):
    import torch  # after argparse: --help stays fast

    os.makedirs(a.out, exist_ok=True)
    for fn in os.listdir(a.out):  # an earlier run's shards would make the folder ambiguous
        if fn.startswith("model") and (fn.endswith(".safetensors") or fn.endswith(".index.json")):
            os.remove(os.path.join(a.out, fn))
    specs, experts, exclude = build_specs(a)
    dims = sorted({inn for _, _, inn in experts.values()})
    calib = {inn: Calibration(inn, a.seed) for inn in dims}
    for inn, c in calib.items():
        print(f"in={inn}: target std {c.target_std:.5f}, quantized calibration std "
              f"{c.quantized_std:.5f}, scale bytes {np.flatnonzero(np.bincount(c.scale_table))}")
    by_name = {n: (d, s, i) for n, d, s, i in gen_checkpoint.tensor_specs(a)}
    cache = {}  # one expert's (packed, scales): the writer asks for each name separately
    checked = set()

    def produce(name):
        if name not in experts:
            dtype, shape, init = by_name[name]
            return gen_checkpoint.make_tensor(name, dtype, shape, init, a.seed, a.bias_std)
        weight, out, inn = experts[name]
        if cache.get("name") != weight:
            packed, scales = calib[inn].draw(rng_for(a.seed, weight), out, inn)
            cache.update(name=weight, packed=packed, scales=scales)
            if inn not in checked:  # the promised scale, on the first real matrix of each shape
                checked.add(inn)
                std = float(dequantize(packed[:64], scales[:64]).std())
                print(f"{weight}: dequantized std {std:.5f} (bf16 generator: "
                      f"{calib[inn].target_std:.5f})")
        part = cache["scales"] if name != weight else cache["packed"]
        return torch.from_numpy(part)

    # Contiguous groups of roughly equal bytes, in spec order (a layer's experts stay together).
    sizes = [nbytes(s) for s in specs]
    total = sum(sizes)
    groups, acc = [[] for _ in range(a.shards)], 0
    for s, n in zip(specs, sizes):
        groups[min(int(acc * a.shards / total), a.shards - 1)].append(s)
        acc += n
    groups = [g for g in groups if g]
    weight_map = {}
    for k, group in enumerate(groups):
        fname = f"model-{k + 1:05d}-of-{len(groups):05d}.safetensors"
        # The writer orders tensors by dtype width then name; an expert's weight and its scale
        # are adjacent in that order ("...w1.weight" < "...w1.weight_scale"), so the cache hits.
        st_io.write_streaming(os.path.join(a.out, fname), group, produce, {"format": "pt"})
        weight_map.update({s[0]: fname for s in group})
        print(f"wrote {fname}: {sum(nbytes(s) for s in group) / 1e9:.2f} GB", flush=True)
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
        json.dump(index, f, indent=2)
    cfg = gen_checkpoint.build_config(a)
    cfg["quantization_config"] = quantize.quark_config(exclude)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(a.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": a.bos, "eos_token_id": a.eos, "do_sample": False,
                   "_from_model_config": True}, f, indent=2)
    print(f"{a.out}: {total / 1e9:.2f} GB of tensors, {len(experts) // 2} MXFP4 expert matrices")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--experts", type=int, default=256)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    # gen_checkpoint's default 0.1 decides routing on its own here: the top-8 of 256 sigmoid scores
    # all sit near 1 (logit std 2), so the bias outweighs their differences and 512 random tokens
    # reach only ~115 of the 256 experts (one gets ~140 of the 4096 picks; 0.01 still gives max
    # ~45). 0.001 gives the spread of uniform picks (all 256 used, max ~29, count std 4.4 vs 3.9),
    # as a load-balanced trained router would; prefill speed depends on that spread.
    p.add_argument("--bias-std", type=float, default=0.001, help="e_score_correction_bias std")
    mine = p.parse_args(argv)
    # Everything else: MiniMax-M2's real per-layer shapes, through gen_checkpoint's own parser so
    # the config and the non-expert tensors are exactly what make_bench_checkpoint.sh writes.
    a = gen_checkpoint.parse_args([
        "--arch", "minimax_m2", "--out", mine.out, "--hidden", "3072", "--layers",
        str(mine.layers), "--heads", "48", "--kv-heads", "8", "--head-dim", "128",
        "--rotary-dim", "64", "--intermediate", "1536", "--experts", str(mine.experts),
        "--top-k", "8", "--vocab", str(mine.vocab), "--rope-theta", "5000000", "--eps", "1e-6",
        "--bos", "1", "--eos", "2", "--seed", str(mine.seed), "--bias-std", str(mine.bias_std)])
    a.shards = max(1, mine.shards)
    return a


if __name__ == "__main__":
    write_slice(parse_args())
