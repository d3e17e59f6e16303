#!/usr/bin/python3
"""`moeserve quantize` (C++, kernels/quant.h) against tools/quantize.py (numpy): both quantize the
same random bf16 checkpoint and must write the same bytes, tensor by tensor and file by file.

Both implement the rounding contract written in tools/quantize.py's docstring (and
kernels/quant.h): FP8 scale = amax / 448 in f32, x = w / scale in f32, e4m3 round to nearest with
ties to the even code, saturating at 448; MXFP4 scale exponent floor(log2 amax) - 2, e2m1 round to
nearest with ties to the even code, saturating at 6. Both use correctly rounded IEEE f32 division,
so no tie can be resolved differently: the expected number of differing bytes is zero, and the
crafted tensors below put exact ties, saturation, signed zeros, all-zero blocks and subnormal
inputs in front of both implementations to prove it.

Independently of the agreement, every code is checked against the value it encodes: each
dequantized element is the nearest representable value (error at most half a step), so two
implementations that shared a mistake would still fail.
"""
import argparse
import filecmp
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import reference  # noqa: E402
import st_io  # noqa: E402

PY = "/usr/bin/python3"

# name: (gen_checkpoint args, format, crafted-tensor kind)
CONFIGS = {
    # Dims not multiples of 128 (edge blocks), and > 128 (several blocks per row and column).
    "minimax_fp8": ("--arch minimax_m2 --hidden 96 --layers 2 --heads 4 --kv-heads 2 --head-dim 24 "
                    "--intermediate 72 --experts 4 --top-k 2 --vocab 128 --seed 31", "fp8-block"),
    "minimax_fp8_multiblock": ("--arch minimax_m2 --hidden 200 --layers 1 --heads 5 --kv-heads 1 "
                               "--head-dim 40 --intermediate 136 --experts 2 --top-k 1 --vocab 64 "
                               "--seed 32 --shards 2 --mtp-layers 1", "fp8-block"),
    "qwen3_fp8_sharded": ("--arch qwen3_moe --hidden 96 --layers 2 --heads 4 --kv-heads 2 "
                          "--head-dim 16 --intermediate 72 --experts 4 --top-k 2 --vocab 128 "
                          "--seed 33 --shards 3 --tie", "fp8-block"),
    "minimax_mxfp4": ("--arch minimax_m2 --hidden 96 --layers 2 --heads 4 --kv-heads 2 --head-dim 24 "
                      "--intermediate 64 --experts 4 --top-k 2 --vocab 128 --seed 34", "mxfp4"),
    "qwen3_mxfp4_sharded": ("--arch qwen3_moe --hidden 64 --layers 2 --heads 4 --kv-heads 2 "
                            "--head-dim 16 --intermediate 96 --experts 4 --top-k 2 --vocab 128 "
                            "--seed 35 --shards 2", "mxfp4"),
}


def e4m3_midpoints_and_codes():
    vals = reference.E4M3[:0x7F].double().numpy()
    return vals, (vals[1:] + vals[:-1]) / 2


def craft(shape, fmt, rng):
    """A bf16 weight whose quantization is full of ties and edge cases."""
    out, inn = shape
    w = np.zeros(shape, np.float32)
    if fmt == "fp8-block":
        vals, mids = e4m3_midpoints_and_codes()
        # Block (0, 0): amax exactly 448 makes scale exactly 1, so x = w: every e4m3 midpoint
        # (5 significant bits, exact in bf16) is a tie between two codes; then the codes
        # themselves, 448, and tiny values that round to +-0.
        pool = np.concatenate([mids, -mids, vals, -vals, [448.0, -1e-30, 1e-30, -0.0, 2.0 ** -10]])
        block = rng.choice(pool, size=(min(out, 128), min(inn, 128)))
        block.flat[0] = 448.0
        w[:block.shape[0], :block.shape[1]] = block
        # The last block stays all zeros (scale 1), with a -0.0 in it.
        w[-1, -1] = -0.0
    else:
        # Groups with amax in [4, 8) have exponent 0 and x = w: put every e2m1 tie, values that
        # saturate (> 6), signed zeros; other rows get an all-zero group, subnormal-scale groups
        # (bf16 values near 2^-130, exponent clamped at -127) and huge ones.
        ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, 7.5, 6.0, 0.1, -0.0]
        pool = np.array(ties + [-t for t in ties])
        w[:] = rng.choice(pool, size=shape)
        w[:, 0::32] = 7.5  # amax 7.5 -> floor(log2) = 2 -> exponent 0
        w[1, :32] = 0.0
        w[2, :32] = rng.choice([0.0, 2.0 ** -133, -(2.0 ** -130), 2.0 ** -128], size=32)
        w[3, :32] = rng.choice([3.0e38, -1.0e38, 1.0e30, 0.0], size=32)
    return torch.from_numpy(w).to(torch.bfloat16)


def add_crafted(folder, fmt, targets):
    """Replaces two quantized weights with crafted ones (keeps shapes, dtypes and shard files)."""
    ck = st_io.Checkpoint(folder)
    rng = np.random.default_rng(7)
    chosen = sorted(targets)[:2]
    by_file = {}
    for name, fname in ck.where.items():
        by_file.setdefault(fname, {})[name] = ck.get(name).clone()
    for name in chosen:
        by_file[ck.where[name]][name] = craft(targets[name], fmt, rng)
    del ck
    for fname, tensors in by_file.items():
        st_io.save_file(tensors, os.path.join(folder, fname), {"format": "pt"})
    return chosen


def raw(t):
    """The tensor's bytes as a flat uint8 array."""
    return t.contiguous().reshape(-1).view(torch.uint8).numpy()


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def check_nearest(name, codes, scales, w, fmt):
    """Every code is the nearest representable value to w / scale (half a step at most)."""
    w = w.float().numpy().astype(np.float64)
    if fmt == "fp8-block":
        s = np.repeat(np.repeat(scales.numpy(), 128, 0), 128, 1)[:w.shape[0], :w.shape[1]]
        x = (w.astype(np.float32) / s.astype(np.float32)).astype(np.float64)
        q = reference.E4M3[codes.long()].double().numpy()
        ax = np.minimum(np.abs(x), 448.0)
        step = np.where(ax < 2.0 ** -6, 2.0 ** -9, 2.0 ** (np.floor(np.log2(np.maximum(ax, 1e-300))) - 3))
        err = np.abs(np.clip(x, -448, 448) - q) / step  # in steps; 448 saturation counted at 448
    else:
        p = codes.long()
        nib = torch.stack([p & 15, p >> 4], -1).reshape(p.shape[0], -1)
        q = reference.E2M1[nib].double().numpy()
        e = scales.long().numpy().astype(np.int64).repeat(32, 1) - 127
        x = np.ldexp(w, -e)
        ax = np.minimum(np.abs(x), 6.0)
        step = np.where(ax < 2, 0.5, np.where(ax < 4, 1.0, 2.0))
        err = np.abs(np.clip(x, -6, 6) - q) / step
    same_sign = np.signbit(q) == np.signbit(x)  # also for values that round to zero
    if err.max() > 0.5 + 1e-12 or not same_sign.all():
        sys.exit(f"FAIL: {name}: a code is not the nearest value (max error {err.max():.3f} steps)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--moeserve", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--config", required=True, choices=sorted(CONFIGS))
    a = ap.parse_args()
    gen, fmt = CONFIGS[a.config]
    work = os.path.join(a.fixtures, "quant_roundtrip_" + a.config)
    shutil.rmtree(work, ignore_errors=True)
    src, cpp, py = (os.path.join(work, d) for d in ("bf16", "cpp", "py"))
    import gen_checkpoint  # noqa: E402  (in-process: no second torch start-up)
    import quantize  # noqa: E402
    gen_checkpoint.write_checkpoint(gen_checkpoint.parse_args(["--out", src] + gen.split()))
    # Non-weight files that must be carried over.
    with open(os.path.join(src, "tokenizer.json"), "w") as f:
        json.dump({"model": {"type": "BPE"}}, f)
    with open(os.path.join(src, "tokenizer_config.json"), "w") as f:
        json.dump({"chat_template": "{{ messages }}"}, f)
    os.makedirs(os.path.join(src, "extra"))
    with open(os.path.join(src, "extra", "LICENSE"), "w") as f:
        f.write("license text\n")
    with open(os.path.join(src, "config.json")) as f:
        targets, _ = quantize.plan(json.load(f), fmt)
    crafted = add_crafted(src, fmt, targets)

    run([a.moeserve, "quantize", "--model", src, "--out", cpp, "--format", fmt, "--threads", "2"])
    quantize.quantize_checkpoint(src, py, fmt)

    C, P, S = st_io.Checkpoint(cpp), st_io.Checkpoint(py), st_io.Checkpoint(src)
    ok = True
    if sorted(C.keys()) != sorted(P.keys()) or C.where != P.where:
        print("FAIL: tensor sets or shard assignment differ:",
              sorted(set(C.keys()) ^ set(P.keys()))[:10]); ok = False
    differing, bytes_total = [], 0
    for name in sorted(set(C.keys()) & set(P.keys())):
        if C.info(name) != P.info(name):
            print(f"FAIL: {name}: {C.info(name)} vs {P.info(name)}"); ok = False
            continue
        cb, pb = raw(C.get(name)), raw(P.get(name))
        bytes_total += cb.size
        if not np.array_equal(cb, pb):
            differing.append((name, int((cb != pb).sum())))
    for name, n in differing:
        print(f"FAIL: {name}: {n} bytes differ"); ok = False
    # Expected layout and values.
    scale_suffix = ".weight_scale_inv" if fmt == "fp8-block" else ".weight_scale"
    for name, (out, inn) in targets.items():
        want = ({name: ("F8_E4M3", (out, inn)),
                 name[:-7] + scale_suffix: ("F32", (-(-out // 128), -(-inn // 128)))}
                if fmt == "fp8-block" else
                {name: ("U8", (out, inn // 2)), name[:-7] + scale_suffix: ("U8", (out, inn // 32))})
        for n, info in want.items():
            if C.info(n) != info:
                print(f"FAIL: {n}: {C.info(n)}, expected {info}"); ok = False
        check_nearest(name, C.get(name), C.get(name[:-7] + scale_suffix), S.get(name), fmt)
    for name in S.keys():  # everything else copied bit for bit
        if name not in targets and (S.info(name) != C.info(name) or
                                    not np.array_equal(raw(S.get(name)), raw(C.get(name)))):
            print(f"FAIL: {name} was not copied unchanged"); ok = False
    # Whole files: same header text and data, so byte-identical.
    for fname in sorted(set(C.where.values())):
        if not filecmp.cmp(os.path.join(cpp, fname), os.path.join(py, fname), shallow=False):
            print(f"FAIL: {fname} differs as a file"); ok = False
    for jf in ("config.json", "model.safetensors.index.json"):
        pc, pp = os.path.join(cpp, jf), os.path.join(py, jf)
        if os.path.exists(pc) or os.path.exists(pp):
            if json.load(open(pc)) != json.load(open(pp)):
                print(f"FAIL: {jf} differs"); ok = False
    for extra in ("generation_config.json", "tokenizer.json", "tokenizer_config.json", "extra/LICENSE"):
        if not filecmp.cmp(os.path.join(src, extra), os.path.join(cpp, extra), shallow=False):
            print(f"FAIL: {extra} not copied"); ok = False
    qc = json.load(open(os.path.join(cpp, "config.json")))["quantization_config"]
    print(f"{a.config}: {len(targets)} linears quantized to {fmt} ({', '.join(crafted)} crafted "
          f"with ties/saturation/zeros), {len(C.keys())} tensors, {bytes_total} bytes compared, "
          f"{sum(n for _, n in differing)} differ; quant_method {qc['quant_method']}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
