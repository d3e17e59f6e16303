#!/usr/bin/python3
"""Golden test for quantized checkpoints: a random bf16 checkpoint is quantized with
`moeserve quantize` (FP8-block or MXFP4), then `moeserve generate` on it (at -tp N) is compared
with tools/reference.py on the same quantized checkpoint, whose weights the reference dequantizes
exactly to f32 (e4m3 * f32 block scale; e2m1 * 2^k).

The engine then computes with exactly those weight values (its fused dequantization is exact), so
the two differ only in f32 summation order and, through it, in rare bf16 rounding flips of matmul
inputs: the tolerance of tests/model/golden_test.py applies unchanged: max|diff| <= 1e-2 *
max|logit|, mean|diff| <= 2e-3 * max|logit|, argmax agreement >= 99%, and greedy 32-token
continuations identical, except that they may part where the reference's own top two logits are
closer than twice the max|diff| observed (a near-tie either side of which is within tolerance;
the test prints where). At tp > 1 the ranks add partial sums in another order as well
(tests/dist/parity_test.py's argument), same tolerance. "Observed" is the largest max|diff| of the
tp sizes checked so far (tp 1 first): every tp runs the continuation's decode steps on the same
kernels, so a tp whose prompt logits happen to land closer to the reference (at tp 2 they once
matched it exactly) has no closer decode steps, and the same near-tie is within tolerance there.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = "/usr/bin/python3"

# name: (gen_checkpoint args, format). FP8 dims are not multiples of 128 (edge blocks, and at
# tp 2 / 8 rank slices start inside a block); MXFP4 dims are multiples of 32, and at tp 8 the
# 96-wide expert intermediate dim (3 groups of 32) leaves ranks with no expert columns at all.
CONFIGS = {
    "minimax_fp8": ("--arch minimax_m2 --hidden 96 --layers 2 --heads 8 --kv-heads 2 --head-dim 16 "
                    "--rotary-dim 8 --intermediate 72 --experts 6 --top-k 2 --vocab 256 --seed 41 "
                    "--bias-std 0.3", "fp8-block"),
    "minimax_mxfp4": ("--arch minimax_m2 --hidden 64 --layers 2 --heads 8 --kv-heads 2 --head-dim 16 "
                      "--rotary-dim 8 --intermediate 96 --experts 6 --top-k 2 --vocab 256 --seed 42 "
                      "--bias-std 0.3", "mxfp4"),
    "qwen3_fp8": ("--arch qwen3_moe --hidden 96 --layers 2 --heads 8 --kv-heads 2 --head-dim 16 "
                  "--intermediate 72 --experts 6 --top-k 2 --vocab 256 --seed 43", "fp8-block"),
    "qwen3_mxfp4": ("--arch qwen3_moe --hidden 64 --layers 2 --heads 8 --kv-heads 2 --head-dim 16 "
                    "--intermediate 64 --experts 6 --top-k 2 --vocab 256 --seed 44 --tie", "mxfp4"),
}
PROMPTS = [list(range(3, 45)), [7, 1, 9], [200]]


def run(cmd):
    # MOESERVE_LOG=info: the test looks for the engine's "quantized checkpoint" line.
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, MOESERVE_LOG="info"))
    if r.returncode != 0:
        sys.exit(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r


def work_dir(a):
    return os.path.join(a.fixtures, f"quant_golden_{a.config}_{a.activation_dtype}")


def numerics(a):
    """The reference's mode that reproduces the engine's --activation-dtype."""
    return "engine-int8" if a.activation_dtype == "int8" else "engine"


def reference_margin(a, model, prefix, ref_token, our_token):
    """The reference's next-token logit for ref_token minus that for our_token after `prefix`.

    Logits may legitimately differ by up to max|diff| each (f32 summation order, and through it
    rare bf16 rounding flips of matmul inputs), so where the reference's top two are closer than
    twice that, either greedy choice is within the numerics contract."""
    out = os.path.join(work_dir(a), "margin.npy")
    run([PY, os.path.join(ROOT, "tools", "reference.py"), "--model", model, "--logits-out", out,
         "--numerics", numerics(a), "--prompt-ids", ",".join(map(str, prefix))])
    last = np.load(out)[-1]
    return float(last[ref_token] - last[our_token])


def check_tp(a, fmt, model, tp_size, prompt_args, ref, ref_logits, ours_logits, observed):
    """moeserve generate at -tp tp_size against the reference; prints the figures. `observed`:
    the largest max|diff| of the tp sizes checked before. Returns (ok, this tp's max|diff|)."""
    ok = True
    tp = ["-tp", str(tp_size)] if tp_size > 1 else []
    r = run([a.moeserve, "generate", "--model", model, "--max-tokens", str(a.max_tokens),
             "--output-format", "json", "--logits-out", ours_logits, "--threads", "1",
             "--ignore-eos", "--activation-dtype", a.activation_dtype] + tp + prompt_args)
    ours = [json.loads(line)["token_ids"] for line in r.stdout.strip().splitlines()]

    L, R = np.load(ours_logits), np.load(ref_logits)
    assert L.shape == R.shape, (L.shape, R.shape)
    scale = float(np.abs(R).max())
    max_abs, mean_abs = float(np.abs(L - R).max()), float(np.abs(L - R).mean())
    agree = float((L.argmax(-1) == R.argmax(-1)).mean())
    print(f"{a.config} ({fmt}, {a.activation_dtype} activations) tp{tp_size}: logits {L.shape}, max|logit| {scale:.3f}, max|diff| "
          f"{max_abs:.2e} ({max_abs / scale:.1e} relative), mean|diff| {mean_abs:.2e}, argmax "
          f"agreement {agree:.4f}")
    if "quantized checkpoint" not in r.stderr:
        print("FAIL: the engine did not report loading a quantized checkpoint"); ok = False
    if max_abs > 1e-2 * scale or mean_abs > 2e-3 * scale:
        print("FAIL: logits differ beyond tolerance"); ok = False
    if agree < 0.99:
        print("FAIL: argmax agreement below 0.99"); ok = False
    # zip() would stop at the shorter list (and the search below assumes equal lengths): check the
    # counts and lengths first.
    want = [a.max_tokens] * len(PROMPTS)
    for who, seqs in (("ours", ours), ("ref", ref["token_ids"])):
        if [len(s) for s in seqs] != want:
            print(f"FAIL: {who} has continuations of lengths {[len(s) for s in seqs]}, "
                  f"expected {want} (one per prompt, --ignore-eos)"); ok = False
    for i, (o, rr) in enumerate(zip(ours, ref["token_ids"])):
        if o == rr or len(o) != len(rr):
            continue
        j = next(k for k in range(len(o)) if o[k] != rr[k])
        margin = reference_margin(a, model, PROMPTS[i] + rr[:j], rr[j], o[j])
        allowed = 2 * max(max_abs, observed)
        if margin <= allowed:
            print(f"sequence {i}: greedy continuations agree for {j} tokens, then part at a near-tie "
                  f"of the reference (its logit for {rr[j]} exceeds that for our {o[j]} by "
                  f"{margin:.2e} <= 2 x max|diff| observed {allowed:.2e})")
        else:
            print(f"FAIL: sequence {i} greedy continuation differs at token {j} (reference margin "
                  f"{margin:.2e})\n  ours {o}\n  ref  {rr}"); ok = False
    print(f"greedy continuations: {len(ours)} sequences x {a.max_tokens} tokens "
          f"{'identical' if ok else 'checked'}")
    return ok, max_abs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--moeserve", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--config", required=True, choices=sorted(CONFIGS))
    ap.add_argument("--tp", default="1", help="comma-separated tp sizes, each checked")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--activation-dtype", choices=["bf16", "int8"], default="bf16",
                    help="moeserve's --activation-dtype; the reference runs the matching mode")
    a = ap.parse_args()
    gen, fmt = CONFIGS[a.config]
    work = work_dir(a)
    shutil.rmtree(work, ignore_errors=True)
    src, model = os.path.join(work, "bf16"), os.path.join(work, fmt)
    run([PY, os.path.join(ROOT, "tools", "gen_checkpoint.py"), "--out", src] + gen.split())
    run([a.moeserve, "quantize", "--model", src, "--out", model, "--format", fmt, "--threads", "1"])

    prompt_args = []
    for p in PROMPTS:
        prompt_args += ["--prompt-ids", ",".join(map(str, p))]
    ref_logits = os.path.join(work, "ref.npy")
    ref = json.loads(run([PY, os.path.join(ROOT, "tools", "reference.py"), "--model", model,
                          "--max-tokens", str(a.max_tokens), "--logits-out", ref_logits, "--json",
                          "--numerics", numerics(a)]
                         + prompt_args).stdout)
    ok, observed = True, 0.0
    for tp in [int(t) for t in a.tp.split(",")]:
        tp_ok, max_abs = check_tp(a, fmt, model, tp, prompt_args, ref, ref_logits,
                                  os.path.join(work, f"ours_tp{tp}.npy"), observed)
        ok &= tp_ok
        observed = max(observed, max_abs)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
