#!/usr/bin/python3
"""How much a quantized checkpoint changes the model: `moeserve generate --logits-out` on a fixed
prompt set, for the bf16 model and for each quantized version, teacher-forced (every prompt
position's next-token distribution, no sampling). Prints per checkpoint:

  top-1 agreement   fraction of positions whose argmax token equals the bf16 model's
  mean KL           mean over positions of KL(p_bf16 || p_quantized), in nats (float64 softmax)
  max KL            the worst position

Usage:
  quant_quality.py --model BF16DIR --quantized FP8DIR [MXFP4DIR ...] --moeserve BIN
                   [--texts-jsonl FILE --limit 16] [--prompts 8 --prompt-len 64 --seed 0]
                   [--threads N] [--json]
With --texts-jsonl (e.g. data/synthetic-gsm8k/test.jsonl for models/minimax-m2-tiny), the first
`--limit` records' "question" + "\n" + "answer" are tokenized with `moeserve tokenize` (the model's
tokenizer.json) and used as prompts. Otherwise (random models have no tokenizer) prompts are token
ids drawn uniformly from [0, vocab) with a fixed seed; --prompt-ids gives explicit ones.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np


def logits(moeserve, model, prompts, threads):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "logits.npy")
        cmd = [moeserve, "generate", "--model", model, "--max-tokens", "1", "--ignore-eos",
               "--logits-out", out]
        if threads:
            cmd += ["--threads", str(threads)]
        for p in prompts:
            cmd += ["--prompt-ids", ",".join(map(str, p))]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"moeserve failed on {model}:\n{r.stderr}")
        return np.load(out).astype(np.float64)


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def compare(base, other):
    lp, lq = log_softmax(base), log_softmax(other)
    kl = (np.exp(lp) * (lp - lq)).sum(-1)
    return {"top1_agreement": float((base.argmax(-1) == other.argmax(-1)).mean()),
            "mean_kl": float(kl.mean()), "max_kl": float(kl.max()), "positions": int(len(kl))}


def describe(model):
    with open(os.path.join(model, "config.json")) as f:
        q = json.load(f).get("quantization_config") or {}
    return {"fp8": "fp8-block", "quark": "mxfp4"}.get(q.get("quant_method"), q.get("quant_method", "bf16"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="bf16 checkpoint")
    ap.add_argument("--quantized", nargs="+", required=True, help="quantized versions of it")
    ap.add_argument("--moeserve", required=True)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--prompt-ids", action="append", help="explicit prompt (comma-separated ids)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--texts-jsonl", help="jsonl with question/answer records to use as prompts")
    ap.add_argument("--limit", type=int, default=16, help="records taken from --texts-jsonl")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    with open(os.path.join(a.model, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    if a.texts_jsonl:
        prompts = []
        with open(a.texts_jsonl) as f:
            for line in list(f)[:a.limit]:
                rec = json.loads(line)
                text = rec.get("question", "") + "\n" + rec.get("answer", "")
                r = subprocess.run([a.moeserve, "tokenize", "--tokenizer", a.model, "--text", text],
                                   capture_output=True, text=True, check=True)
                prompts.append(json.loads(r.stdout))
    elif a.prompt_ids:
        prompts = [[int(t) for t in s.split(",")] for s in a.prompt_ids]
    else:
        rng = np.random.default_rng(a.seed)
        prompts = [rng.integers(0, vocab, a.prompt_len).tolist() for _ in range(a.prompts)]
    base = logits(a.moeserve, a.model, prompts, a.threads)
    results = {}
    for q in a.quantized:
        r = compare(base, logits(a.moeserve, q, prompts, a.threads))
        r["format"] = describe(q)
        results[q] = r
        if not a.json:
            print(f"{r['format']:10s} {q}: top-1 agreement {r['top1_agreement']:.4f}, mean "
                  f"KL(bf16||q) {r['mean_kl']:.3e} nats, max KL {r['max_kl']:.3e} "
                  f"({r['positions']} positions)")
    if a.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
