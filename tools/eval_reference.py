#!/usr/bin/python3
"""GSM8K with the PyTorch reference on exactly the prompts `moeserve eval gsm8k` sent.

Reads a moeserve eval report (--output JSON: per-question prompt, target, response), re-runs every
prompt through tools/reference.py greedily (engine numerics by default, or --numerics bf16 / f32) with
lm-eval's stop strings, scores strict-match and flexible-extract with lm-eval's gsm8k rules, and prints
the reference's accuracy, moeserve's, and how many responses are identical text.

  tools/eval_reference.py --model DIR --report report.json --moeserve build/src/apps/moeserve
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402

STOPS = ["Question:", "</s>", "<|im_end|>"]


def byte_decoder():
    # GPT-2's byte <-> printable-unicode table, inverted.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def strict(text):
    m = re.search(r"#### (\-?[0-9\.\,]+)", text)
    return m.group(1) if m else "[invalid]"


def flexible(text):
    ms = re.findall(r"(-?[$0-9.,]{2,})|(-?[0-9]+)", text)
    if not ms:
        return "[invalid]"
    m = ms[-1]
    return m[0] or m[1]


def normalize(s):
    for pat in [",", r"\$", r"(?s).*#### ", r"\.$"]:
        s = re.sub(pat, "", s)
    return s.strip().lower()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--report", required=True)
    ap.add_argument("--moeserve", required=True)
    ap.add_argument("--numerics", default="engine", choices=reference.NUMERICS)
    ap.add_argument("--max-tokens", type=int, default=256)
    a = ap.parse_args()

    report = json.load(open(a.report))
    samples = report["samples"]
    tok = json.load(open(os.path.join(a.model, "tokenizer.json")))
    id_to_token = {i: t for t, i in tok["model"]["vocab"].items()}
    for t in tok.get("added_tokens", []):
        id_to_token[t["id"]] = t["content"]
    bd = byte_decoder()

    def decode(ids):
        return bytes(bd[c] for i in ids for c in id_to_token[i]).decode("utf-8", "replace")

    model = reference.Model(a.model, a.numerics)
    scores = {"strict": [], "flexible": []}
    ours = {"strict": [], "flexible": []}
    identical = 0
    for s in samples:
        ids = json.loads(subprocess.run([a.moeserve, "tokenize", "--tokenizer", a.model, "--text",
                                         s["prompt"]], capture_output=True, text=True,
                                        check=True).stdout)
        cache = model.new_cache()
        last = model.forward(ids, cache)[-1]
        out, text = [], ""
        for _ in range(a.max_tokens):
            out.append(reference.argmax_lowest(last))
            text = decode(out)
            if any(st in text for st in STOPS):
                break
            last = model.forward([out[-1]], cache)[-1]
        for st in STOPS:
            if st in text:
                text = text[:text.index(st)]
        target = normalize(s["target"])
        scores["strict"].append(normalize(strict(text)) == target)
        scores["flexible"].append(normalize(flexible(text)) == target)
        ours["strict"].append(bool(s["strict-match"]["exact_match"]))
        ours["flexible"].append(bool(s["flexible-extract"]["exact_match"]))
        identical += text == s["response"]
        if os.environ.get("EVAL_REF_DEBUG"):
            print(repr(text), "\n", repr(s["response"]))
    n = len(samples)

    def fmt(v):
        m = sum(v) / n
        se = math.sqrt(sum((x - m) ** 2 for x in v) / (n - 1) / n) if n > 1 else float("nan")
        return f"{m:.3f} +- {se:.3f}"

    print(f"{n} questions, reference numerics {a.numerics}")
    print(f"  reference: strict-match {fmt(scores['strict'])}, flexible-extract {fmt(scores['flexible'])}")
    print(f"  moeserve : strict-match {fmt(ours['strict'])}, flexible-extract {fmt(ours['flexible'])}")
    print(f"  identical responses: {identical}/{n}")


if __name__ == "__main__":
    main()
