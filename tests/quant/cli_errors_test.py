#!/usr/bin/python3
"""Broken quantized checkpoints and bad `moeserve quantize` inputs through the real binary: each
must exit non-zero with a message naming the tensor or the config key (and what was expected),
never load or write something half-right. Like tests/model/cli_errors_test.py, each case copies a
good checkpoint, breaks one thing, and checks the exit status and the message.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import st_io  # noqa: E402
from cli_failure import broken_copy_generate, expect_failure  # noqa: E402

PY = "/usr/bin/python3"
GEN = ("--arch minimax_m2 --hidden 64 --layers 2 --heads 4 --kv-heads 2 --head-dim 16 "
       "--rotary-dim 8 --intermediate 32 --experts 4 --top-k 2 --vocab 128 --seed 6")
GEN_72 = GEN.replace("--intermediate 32", "--intermediate 72")
Q = "model.layers.0.self_attn.q_proj"
W1 = "model.layers.1.block_sparse_moe.experts.2.w1"
ST = "model.safetensors"


def rewrite(folder, fn):
    ck = st_io.Checkpoint(folder)
    tensors = {k: ck.get(k).clone() for k in ck.keys()}
    dtypes = {k: ck.info(k)[0] for k in ck.keys()}
    del ck
    fn(tensors, dtypes)
    # F8_E4M3 codes are uint8 tensors to torch: keep their dtype name.
    specs = [(n, dtypes.get(n, st_io.st_dtype(t)), tuple(t.shape)) for n, t in tensors.items()]
    st_io.write_streaming(os.path.join(folder, ST), specs,
                          lambda n: (dtypes.get(n, st_io.st_dtype(tensors[n])), tensors[n]))


def set_tensor(name, t, dtype=None):
    def fn(tensors, dtypes):
        tensors[name] = t(tensors[name]) if callable(t) else t
        dtypes[name] = dtype or st_io.st_dtype(tensors[name])
    return lambda d: rewrite(d, fn)


def drop_tensor(name):
    return lambda d: rewrite(d, lambda t, dt: t.pop(name))


def edit_quant(fn):
    def go(folder):
        path = os.path.join(folder, "config.json")
        with open(path) as f:
            cfg = json.load(f)
        fn(cfg["quantization_config"])
        with open(path, "w") as f:
            json.dump(cfg, f)
    return go


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--moeserve", required=True)
    ap.add_argument("--fixtures", required=True)
    a = ap.parse_args()
    work = os.path.join(a.fixtures, "quant_cli_errors")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    bf16, bf16_72 = os.path.join(work, "bf16"), os.path.join(work, "bf16_72")
    fp8, mx = os.path.join(work, "fp8"), os.path.join(work, "mxfp4")
    for out, args in ((bf16, GEN), (bf16_72, GEN_72)):
        subprocess.run([PY, os.path.join(ROOT, "tools", "gen_checkpoint.py"), "--out", out]
                       + args.split(), check=True)
    for out, fmt in ((fp8, "fp8-block"), (mx, "mxfp4")):
        subprocess.run([a.moeserve, "quantize", "--model", bf16, "--out", out, "--format", fmt,
                        "--threads", "1"], check=True, capture_output=True)
    # The good ones load and run (otherwise every case below would fail for another reason).
    for good in (fp8, mx):
        r = subprocess.run([a.moeserve, "generate", "--model", good, "--prompt-ids", "1,2",
                            "--max-tokens", "2", "--threads", "1"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"FAIL: the unbroken quantized checkpoint {good} does not load:\n{r.stderr}")

    g = lambda *c: broken_copy_generate(a.moeserve, c[0], work, *c[1:],  # noqa: E731
                                         extra=("--threads", "1"))
    results = [
        g(fp8, "fp8_scale_shape", set_tensor(Q + ".weight_scale_inv", torch.ones(2, 1)),
          [ST, Q + ".weight_scale_inv", "expected shape [1, 1], found [2, 1]"]),
        g(fp8, "fp8_scale_dtype", set_tensor(Q + ".weight_scale_inv",
                                             lambda t: t.to(torch.bfloat16)),
          [ST, Q + ".weight_scale_inv", "expected dtype F32, found BF16"]),
        g(fp8, "fp8_scale_missing", drop_tensor(Q + ".weight_scale_inv"),
          [Q + ".weight_scale_inv", "missing"]),
        g(fp8, "fp8_weight_left_bf16", set_tensor(Q + ".weight", torch.zeros(64, 64).bfloat16()),
          [ST, Q + ".weight", "expected dtype F8_E4M3, found BF16"]),
        g(mx, "mxfp4_scale_shape", set_tensor(W1 + ".weight_scale",
                                              torch.zeros(32, 1, dtype=torch.uint8)),
          [ST, W1 + ".weight_scale", "expected shape [32, 2], found [32, 1]"]),
        g(mx, "mxfp4_scale_dtype", set_tensor(W1 + ".weight_scale", lambda t: t.float()),
          [ST, W1 + ".weight_scale", "expected dtype U8, found F32"]),
        g(mx, "mxfp4_weight_unpacked", set_tensor(W1 + ".weight",
                                                  torch.zeros(32, 64, dtype=torch.uint8)),
          [ST, W1 + ".weight", "expected shape [32, 32], found [32, 64]"]),
        g(fp8, "unknown_quant_method", edit_quant(lambda q: q.__setitem__("quant_method", "gptq")),
          ["config.json", "quant_method", "gptq"]),
        g(fp8, "block_size_64", edit_quant(lambda q: q.__setitem__("weight_block_size", [64, 64])),
          ["config.json", "weight_block_size", "[64,64]"]),
        g(fp8, "block_size_absent", edit_quant(lambda q: q.pop("weight_block_size")),
          ["config.json", "weight_block_size"]),
        g(mx, "group_size_64", edit_quant(
            lambda q: q["global_quant_config"]["weight"].__setitem__("group_size", 64)),
          ["config.json", "group_size", "64"]),
        g(mx, "scale_format_e4m3", edit_quant(
            lambda q: q["global_quant_config"]["weight"].__setitem__("scale_format", "e4m3")),
          ["config.json", "scale_format"]),
    ]

    def quantize_case(name, src, fmt, expected, prepare=None):
        out = os.path.join(work, name + "_out")
        shutil.rmtree(out, ignore_errors=True)
        if prepare:
            src = prepare(src, out)
        return expect_failure(name, [a.moeserve, "quantize", "--model", src, "--out", out,
                            "--format", fmt], expected)

    def broken_copy(breaker):
        def prepare(src, out):
            folder = out + "_src"
            shutil.rmtree(folder, ignore_errors=True)
            shutil.copytree(src, folder)
            breaker(folder)
            return folder
        return prepare

    def nonempty_out(src, out):
        os.makedirs(out)
        open(os.path.join(out, "keep.txt"), "w").close()
        return src

    E72 = "model.layers.0.block_sparse_moe.experts.0.w2.weight"
    results += [
        quantize_case("quantize_mxfp4_group_misfit", bf16_72, "mxfp4",
                      [E72, "multiple of the group size 32", "72"]),
        quantize_case("quantize_already_quantized", fp8, "mxfp4",
                      ["config.json", "quantization_config"]),
        quantize_case("quantize_missing_expert", bf16, "fp8-block", ["missing tensor " + W1 + ".weight"],
                      broken_copy(drop_tensor(W1 + ".weight"))),
        quantize_case("quantize_f32_expert", bf16, "fp8-block",
                      [W1 + ".weight", "expected dtype BF16, found F32"],
                      broken_copy(set_tensor(W1 + ".weight", lambda t: t.float()))),
        quantize_case("quantize_nonfinite", bf16, "mxfp4", [W1 + ".weight", "non-finite"],
                      broken_copy(set_tensor(W1 + ".weight",
                                             lambda t: t.index_fill(0, torch.tensor([3]), float("inf"))))),
        quantize_case("quantize_out_not_empty", bf16, "fp8-block", ["--out", "not empty"],
                      nonempty_out),
    ]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
