#!/usr/bin/python3
"""FP8 (e4m3) KV cache against the bf16 KV cache on the same checkpoint and prompts: reports top-1
agreement and mean KL(bf16 || fp8) over every prompt position, and requires top-1 >= 0.95 and mean
KL <= 0.01 (e4m3 keeps 3 mantissa bits per element with a scale per token and kv head: a relative
error up to 1/16 per element, averaging out in the attention sums; a broken scale or layout gives
top-1 near chance and KL of order 1).
"""
import argparse
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--moeserve", required=True)
    ap.add_argument("--fixtures", required=True)
    a = ap.parse_args()
    model = os.path.join(a.fixtures, "kv_fp8_quality")
    if not os.path.exists(os.path.join(model, "config.json")):
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tools", "gen_checkpoint.py"),
                        "--out", model, "--arch", "minimax_m2", "--hidden", "128", "--layers", "2",
                        "--heads", "8", "--kv-heads", "2", "--head-dim", "32", "--rotary-dim", "16",
                        "--intermediate", "64", "--experts", "8", "--top-k", "2", "--vocab", "512",
                        "--seed", "31"], check=True)
    prompts = [list(range(1, 200)), [5, 6, 7, 8, 9, 10, 11, 12] * 8, list(range(300, 420, 3))]
    logits = {}
    for dtype in ("bf16", "fp8"):
        out = os.path.join(model, dtype + ".npy")
        cmd = [a.moeserve, "generate", "--model", model, "--max-tokens", "1", "--kv-cache-dtype",
               dtype, "--logits-out", out]
        for p in prompts:
            cmd += ["--prompt-ids", ",".join(map(str, p))]
        subprocess.run(cmd, check=True, capture_output=True)
        logits[dtype] = np.load(out).astype(np.float64)
    b, f = logits["bf16"], logits["fp8"]
    lb = b - np.log(np.exp(b - b.max(-1, keepdims=True)).sum(-1, keepdims=True)) - b.max(-1, keepdims=True)
    lf = f - np.log(np.exp(f - f.max(-1, keepdims=True)).sum(-1, keepdims=True)) - f.max(-1, keepdims=True)
    kl = float((np.exp(lb) * (lb - lf)).sum(-1).mean())
    top1 = float((b.argmax(-1) == f.argmax(-1)).mean())
    print(f"fp8 KV vs bf16 KV over {b.shape[0]} positions: top-1 agreement {top1:.4f}, "
          f"mean KL {kl:.2e}, max|diff| {np.abs(b - f).max():.3f}")
    sys.exit(0 if top1 >= 0.95 and kl <= 0.01 else 1)


if __name__ == "__main__":
    main()
