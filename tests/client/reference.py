#!/usr/bin/env python3
"""Reference outputs from Python itself for the client tests.

  reference.py random IN.json OUT.json   IN: [[seed, n, k, draws], ...]
      OUT: for each case, `draws` successive random.Random(seed).sample(range(n), k) lists,
      then getrandbits(1..64) once each, then random() once.
  reference.py gsm8k IN.json OUT.json    IN: [text, ...]
      OUT: for each text, lm-eval's strict-match and flexible-extract filter outputs, both after
      exact_match's preprocessing, and vLLM's get_answer_value (null for INVALID).
"""
import ast
import json
import re
import sys


def run_random(cases):
    out = []
    for seed, n, k, draws in cases:
        rng = random_module.Random(seed)
        samples = [rng.sample(range(n), k) for _ in range(draws)]
        bits = [rng.getrandbits(b) for b in range(1, 65)]
        out.append({"samples": samples, "bits": [str(b) for b in bits], "random": rng.random()})
    return out


def regex_filter(text, pattern, group_select):
    # lm_eval.filters.extraction.RegexFilter for one response
    match = re.findall(pattern, text)
    if not match:
        return "[invalid]"
    match = match[group_select]
    if isinstance(match, tuple):
        match = [m for m in match if m]
        match = match[0] if match else "[invalid]"
    return match.strip()


def normalize(s):
    # exact_match with the gsm8k yaml's regexes_to_ignore and ignore_case
    for r in [",", "\\$", "(?s).*#### ", "\\.$"]:
        s = re.sub(r, "", s)
    return s.lower()


def vllm_answer(text):
    text = text.replace(",", "")
    numbers = re.findall(r"\d+", text)
    if not numbers:
        return None
    try:
        return str(ast.literal_eval(numbers[-1]))
    except SyntaxError:
        return None


def run_gsm8k(texts):
    out = []
    for t in texts:
        strict = regex_filter(t, r"#### (\-?[0-9\.\,]+)", 0)
        flex = regex_filter(t, r"(-?[$0-9.,]{2,})|(-?[0-9]+)", -1)
        out.append({"strict": strict, "flex": flex, "strict_norm": normalize(strict),
                    "flex_norm": normalize(flex), "text_norm": normalize(t),
                    "vllm": vllm_answer(t)})
    return out


if __name__ == "__main__":
    import random as random_module
    mode, src, dst = sys.argv[1:4]
    with open(src) as f:
        data = json.load(f)
    result = run_random(data) if mode == "random" else run_gsm8k(data)
    with open(dst, "w") as f:
        json.dump(result, f)
