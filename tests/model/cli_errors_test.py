#!/usr/bin/python3
"""Broken checkpoints and configs through the real binary: `moeserve generate` must exit non-zero
with a message naming the file, the tensor, what was expected and what was found, and never run
a model that is silently missing a tensor. Each case copies a good random checkpoint, breaks one
thing, and checks the exit status and the message.
"""
import argparse
import json
import os
import subprocess
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import st_io  # noqa: E402
from cli_failure import broken_copy_generate  # noqa: E402

PY = "/usr/bin/python3"
GEN = ("--arch minimax_m2 --hidden 64 --layers 2 --heads 4 --kv-heads 2 --head-dim 16 "
       "--rotary-dim 8 --intermediate 24 --experts 4 --top-k 2 --vocab 128 --seed 5")
QN = "model.layers.1.self_attn.q_norm.weight"


def load_all(folder):
    ck = st_io.Checkpoint(folder)
    return {k: ck.get(k).clone() for k in ck.keys()}


def rewrite(folder, fn):
    tensors = load_all(folder)
    fn(tensors)
    st_io.save_file(tensors, os.path.join(folder, "model.safetensors"))


def edit_config(folder, fn):
    path = os.path.join(folder, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    fn(cfg)
    with open(path, "w") as f:
        json.dump(cfg, f)


def truncate(folder):
    path = os.path.join(folder, "model.safetensors")
    os.truncate(path, os.path.getsize(path) - 100)


def corrupt_header(folder):
    path = os.path.join(folder, "model.safetensors")
    with open(path, "r+b") as f:
        f.seek(8)
        f.write(b"{\"oops\": [1, 2")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--moeserve", required=True)
    ap.add_argument("--fixtures", required=True)
    a = ap.parse_args()
    base = os.path.join(a.fixtures, "cli_errors_base")
    if not os.path.exists(os.path.join(base, "config.json")):
        subprocess.run([PY, os.path.join(ROOT, "tools", "gen_checkpoint.py"), "--out", base]
                       + GEN.split(), check=True)
    work = os.path.join(a.fixtures, "cli_errors")
    os.makedirs(work, exist_ok=True)
    st = "model.safetensors"
    cases = [
        ("missing_tensor", lambda d: rewrite(d, lambda t: t.pop(QN)),
         ["missing tensor " + QN, "[64]", "BF16"]),
        # ATOM's bug: q_norm saved at the per-rank size. Refused at every TP size, by name.
        ("per_rank_q_norm", lambda d: rewrite(d, lambda t: t.__setitem__(QN, t[QN][:32].clone())),
         [st, QN, "expected shape [64], found [32]"]),
        ("per_rank_q_norm_tp2", lambda d: rewrite(d, lambda t: t.__setitem__(QN, t[QN][:32].clone())),
         [st, QN, "expected shape [64], found [32]"], ["-tp", "2"]),
        ("wrong_shape", lambda d: rewrite(d, lambda t: t.__setitem__(
            "model.layers.0.self_attn.o_proj.weight", torch.zeros(64, 32, dtype=torch.bfloat16))),
         [st, "model.layers.0.self_attn.o_proj.weight", "expected shape [64, 64], found [64, 32]"]),
        ("wrong_dtype", lambda d: rewrite(d, lambda t: t.__setitem__(
            "model.layers.0.self_attn.q_proj.weight",
            t["model.layers.0.self_attn.q_proj.weight"].float())),
         [st, "model.layers.0.self_attn.q_proj.weight", "expected dtype BF16, found F32"]),
        ("unexpected_tensor", lambda d: rewrite(d, lambda t: t.__setitem__(
            "model.layers.0.self_attn.rotary_emb.inv_freq", torch.zeros(4))),
         ["unexpected tensor", "model.layers.0.self_attn.rotary_emb.inv_freq", st]),
        ("truncated_file", truncate, [st, "truncated file"]),
        ("corrupt_header", corrupt_header, [st, "corrupt header"]),
        ("rope_scaling", lambda d: edit_config(d, lambda c: c.__setitem__(
            "rope_scaling", {"type": "yarn", "factor": 4})), ["config.json", "rope_scaling"]),
        ("softmax_scoring", lambda d: edit_config(d, lambda c: c.__setitem__(
            "scoring_func", "softmax")), ["config.json", "scoring_func", "softmax"]),
        ("unknown_architecture", lambda d: edit_config(d, lambda c: c.__setitem__(
            "architectures", ["LlamaForCausalLM"])), ["unsupported architecture LlamaForCausalLM"]),
    ]
    results = [broken_copy_generate(a.moeserve, base, work, *c) for c in cases]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
