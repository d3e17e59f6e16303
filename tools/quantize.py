#!/usr/bin/python3
"""Quantize a bf16 MiniMax-M2 / Qwen3-MoE checkpoint to FP8-block or MXFP4 (numpy).

An independent implementation of `moeserve quantize` (no code shared with the C++; tests/quant
checks that both write the same bytes):

  --format fp8-block   MiniMax-M2's official FP8 release layout: every q/k/v/o projection and
                       every expert's w1/w2/w3 (Qwen3: gate_proj/up_proj/down_proj) becomes an
                       F8_E4M3 `.weight` [out, in] plus an F32 `.weight_scale_inv`
                       [ceil(out/128), ceil(in/128)]; W = code * scale_inv (a multiplier).
  --format mxfp4       AMD Quark's MXFP4 export layout: only the experts' linears, U8 `.weight`
                       [out, in/2] (element 2i in the low nibble of byte i, 2i+1 in the high one)
                       plus U8 e8m0 `.weight_scale` [out, in/32]; W = e2m1(code) * 2^(scale-127).

Rounding rules (the contract both implementations follow):
  fp8-block  per 128x128 block (edge blocks smaller): amax = max|w| in f32; scale = amax / 448
             (one f32 division; amax == 0 gives scale 1); x = w / scale (one f32 division);
             code = nearest e4m3fn value to x, ties to the even code (mantissa LSB 0), |x| >= 448
             saturates to 448, sign kept also when the magnitude rounds to 0.
             Here: the exponent comes from frexp, the mantissa step is rounded with np.rint
             (half to even) in float64, where a / 2^k is exact.
  mxfp4      per 32 consecutive columns of a row: amax = max|w|; e = floor(log2 amax) - 2
             (2 = e2m1's largest exponent), exactly from frexp, clamped to [-127, 127]; amax == 0
             gives e = 0; scale byte = e + 127; x = w * 2^-e (exact); code = nearest of
             0, .5, 1, 1.5, 2, 3, 4, 6 (above 6 saturates to 6), ties to the even code, sign kept.
             Here: distances to the whole table, the even code winning a tie.

Everything else is copied unchanged; the output mirrors the input's shards; config.json gets the
release's quantization_config; every non-weight file is copied.
"""

import argparse
import json
import os
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402

FP8_CONFIG = {"quant_method": "fp8", "fmt": "float8_e4m3fn", "activation_scheme": "dynamic",
              "weight_block_size": [128, 128],
              "modules_to_not_convert": ["gate", "e_score_correction_bias", "lm_head"]}


def quark_config(exclude):
    def spec(dynamic):
        return {"dtype": "fp4", "qscheme": "per_group", "group_size": 32, "ch_axis": -1,
                "scale_format": "e8m0", "scale_type": "float", "round_method": "half_even",
                "is_dynamic": dynamic}
    return {"quant_method": "quark",
            "global_quant_config": {"weight": spec(False), "input_tensors": spec(True),
                                    "output_tensors": None, "bias": None},
            "exclude": exclude,
            "export": {"weight_format": "real_quantized", "pack_method": "reorder"},
            "layer_quant_config": {}, "layer_type_quant_config": {}, "kv_cache_quant_config": {}}


# ---- element encoders --------------------------------------------------------------------------

def encode_e4m3(x):
    """float32 array -> uint8 e4m3fn codes (RNE, saturating to +-448, sign kept)."""
    sign = np.signbit(x).astype(np.uint8) << 7
    a = np.abs(x).astype(np.float64)
    _, E = np.frexp(a)  # a = m * 2^E, m in [0.5, 1): floor(log2 a) = E - 1 (a > 0)
    e = np.maximum(E.astype(np.int64) - 1, -6)  # below 2^-6 the step stays 2^-9 (subnormals)
    n = np.rint(np.ldexp(a, 3 - e))  # a in units of the mantissa step 2^(e-3); half to even
    carry = n >= 16  # rounded up to the next power of two
    e = np.where(carry, e + 1, e)
    n = np.where(carry, 8, n).astype(np.int64)
    code = np.where(n < 8, n, ((e + 7) << 3) + (n - 8))  # n < 8 only for subnormals (e = -6)
    code = np.where(a >= 448.0, 0x7E, code)
    return code.astype(np.uint8) | sign


E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def encode_e2m1(x):
    """float64 array -> uint8 nibbles (nearest, ties to the even code, sign in bit 3)."""
    sign = np.signbit(x).astype(np.uint8) << 3
    d = np.abs(np.abs(x)[..., None] - E2M1_VALUES)
    nearest = d == d.min(-1, keepdims=True)
    preference = nearest * (2 - (np.arange(8) % 2))  # a tie is between neighbours: even wins
    return np.argmax(preference, -1).astype(np.uint8) | sign


# ---- weight quantizers ---------------------------------------------------------------------------

def fp8_block_scales(w):
    out, inn = w.shape
    rb, cb = -(-out // 128), -(-inn // 128)
    padded = np.zeros((rb * 128, cb * 128), np.float32)
    padded[:out, :inn] = np.abs(w)
    amax = padded.reshape(rb, 128, cb, 128).max(axis=(1, 3))
    return np.where(amax == 0, np.float32(1), amax / np.float32(448)).astype(np.float32)


def fp8_block_quantize(w):
    """w float32 [out, in] -> (codes uint8 [out, in], scale_inv float32 [rb, cb])."""
    scale = fp8_block_scales(w)
    full = np.repeat(np.repeat(scale, 128, 0), 128, 1)[:w.shape[0], :w.shape[1]]
    return encode_e4m3((w / full).astype(np.float32)), scale


def mxfp4_exponents(w):
    out, inn = w.shape
    amax = np.abs(w).reshape(out, inn // 32, 32).max(-1)
    _, E = np.frexp(amax)
    return np.where(amax == 0, 0, np.clip(E.astype(np.int64) - 1 - 2, -127, 127))


def mxfp4_quantize(w):
    """w float32 [out, in] -> (packed uint8 [out, in/2], scales uint8 [out, in/32])."""
    out, inn = w.shape
    exp = mxfp4_exponents(w)
    packed = np.empty((out, inn // 2), np.uint8)
    for r0 in range(0, out, 256):  # bounds the [rows, in, 8] distance array
        r1 = min(out, r0 + 256)
        x = np.ldexp(w[r0:r1].astype(np.float64).reshape(r1 - r0, inn // 32, 32),
                     -exp[r0:r1, :, None])
        codes = encode_e2m1(x).reshape(r1 - r0, inn)
        packed[r0:r1] = codes[:, 0::2] | (codes[:, 1::2] << 4)
    return packed, (exp + 127).astype(np.uint8)


# ---- checkpoint ----------------------------------------------------------------------------------

def plan(cfg, fmt):
    """{weight name: (out, in)} of the linears the format quantizes, and the mxfp4 exclude list."""
    arch = cfg["architectures"][0]
    H, hd = cfg["hidden_size"], cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    qw = cfg["num_attention_heads"] * hd
    kw = cfg.get("num_key_value_heads", cfg["num_attention_heads"]) * hd
    if arch == "MiniMaxM2ForCausalLM":
        experts, inter = cfg["num_local_experts"], cfg["intermediate_size"]
        prefix, up, down = "block_sparse_moe.experts", ("w1", "w3"), ("w2",)
        exclude = ["lm_head", "*block_sparse_moe.gate*", "*self_attn*"]
    elif arch == "Qwen3MoeForCausalLM":
        experts, inter = cfg["num_experts"], cfg["moe_intermediate_size"]
        prefix, up, down = "mlp.experts", ("gate_proj", "up_proj"), ("down_proj",)
        exclude = ["lm_head", "*mlp.gate", "*self_attn*"]
    else:
        raise SystemExit(f"quantize.py: unsupported architecture {arch}")
    targets = {}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        if fmt == "fp8-block":
            targets.update({p + "self_attn.q_proj.weight": (qw, H), p + "self_attn.k_proj.weight": (kw, H),
                            p + "self_attn.v_proj.weight": (kw, H), p + "self_attn.o_proj.weight": (H, qw)})
        for e in range(experts):
            for n in up:
                targets[f"{p}{prefix}.{e}.{n}.weight"] = (inter, H)
            for n in down:
                targets[f"{p}{prefix}.{e}.{n}.weight"] = (H, inter)
    return targets, exclude


def scale_name(weight, fmt):
    return weight[:-len(".weight")] + (".weight_scale_inv" if fmt == "fp8-block" else ".weight_scale")


def check_targets(ck, targets, fmt):
    for name, (out, inn) in sorted(targets.items()):
        if name not in ck.where:
            raise SystemExit(f"quantize.py: missing tensor {name} (expected BF16 [{out}, {inn}])")
        dtype, shape = ck.info(name)
        if dtype != "BF16" or shape != (out, inn):
            raise SystemExit(f"quantize.py: tensor {name}: expected BF16 [{out}, {inn}], "
                             f"found {dtype} {list(shape)}")
        if fmt == "mxfp4" and inn % 32:
            raise SystemExit(f"quantize.py: tensor {name}: MXFP4 needs the input dim to be a "
                             f"multiple of the group size 32, got {inn}")
        if scale_name(name, fmt) in ck.where:
            raise SystemExit(f"quantize.py: tensor {scale_name(name, fmt)} already exists")


def quantize_checkpoint(src, dst, fmt):
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    if "quantization_config" in cfg:
        raise SystemExit("quantize.py: the input already has a quantization_config")
    targets, exclude = plan(cfg, fmt)
    ck = st_io.Checkpoint(src)
    check_targets(ck, targets, fmt)
    if os.path.exists(dst) and os.listdir(dst):
        raise SystemExit(f"quantize.py: --out {dst} exists and is not empty")
    os.makedirs(dst, exist_ok=True)

    scale_of = {scale_name(n, fmt): n for n in targets}

    def weight_f32(name):
        w = ck.get(name).float().numpy()
        if not np.isfinite(w).all():
            raise SystemExit(f"quantize.py: tensor {name} has a non-finite value")
        return w

    def produce(name):
        if name in scale_of:  # the scales alone: cheap, and no codes kept waiting for their turn
            w = weight_f32(scale_of[name])
            if fmt == "fp8-block":
                return torch.from_numpy(fp8_block_scales(w))
            return torch.from_numpy((mxfp4_exponents(w) + 127).astype(np.uint8))
        if name in targets:
            w = weight_f32(name)
            if fmt == "fp8-block":
                return "F8_E4M3", torch.from_numpy(fp8_block_quantize(w)[0])
            return torch.from_numpy(mxfp4_quantize(w)[0])
        return ck.get(name)

    by_file = {}
    for name, fname in ck.where.items():
        by_file.setdefault(fname, []).append(name)
    weight_map, total = {}, 0
    for fname, names in sorted(by_file.items()):
        specs = []
        for n in names:
            dtype, shape = ck.info(n)
            if n not in targets:
                specs.append((n, dtype, shape))
            elif fmt == "fp8-block":
                specs += [(n, "F8_E4M3", shape),
                          (scale_name(n, fmt), "F32", (-(-shape[0] // 128), -(-shape[1] // 128)))]
            else:
                specs += [(n, "U8", (shape[0], shape[1] // 2)),
                          (scale_name(n, fmt), "U8", (shape[0], shape[1] // 32))]
        total += st_io.write_streaming(os.path.join(dst, fname), specs, produce, {"format": "pt"})
        weight_map.update({s[0]: fname for s in specs})
    if os.path.exists(os.path.join(src, "model.safetensors.index.json")):
        with open(os.path.join(dst, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))},
                      f, indent=2)
    cfg["quantization_config"] = FP8_CONFIG if fmt == "fp8-block" else quark_config(exclude)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    for fname in os.listdir(src):
        if fname in ("config.json", "model.safetensors.index.json") or fname.endswith(".safetensors"):
            continue
        s, d = os.path.join(src, fname), os.path.join(dst, fname)
        shutil.copytree(s, d) if os.path.isdir(s) else shutil.copyfile(s, d)
    return len(targets)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="bf16 checkpoint folder")
    p.add_argument("--out", required=True, help="output folder (created; must be empty)")
    p.add_argument("--format", required=True, choices=["fp8-block", "mxfp4"])
    a = p.parse_args(argv)
    n = quantize_checkpoint(a.model, a.out, a.format)
    print(f"quantized {n} linear weights to {a.format} in {a.out}")


if __name__ == "__main__":
    main()
