#!/usr/bin/python3
"""Writes a random Hugging Face checkpoint folder for MiniMax-M2 or Qwen3-MoE (tests and benches).

Output: config.json, generation_config.json, model.safetensors (or K shards plus
model.safetensors.index.json). Every tensor is bf16 except MiniMax-M2's
e_score_correction_bias, which is F32 as in the published checkpoints (their FP8 quantization config
lists it in modules_to_not_convert and loaders treat it as F32); `--gate-f32` also stores the router
weight in F32, as the official FP8 release does.

Scales keep activations O(1) through the layers and make greedy decoding decisive:
embeddings N(0,1) (N(0, 4/hidden) when tied to lm_head); projections N(0, 1/in); router N(0, 4/in) so sigmoid scores spread;
lm_head N(0, 4/in) so logits have std ~2; norm weights U(0.5, 1.5) (never all ones, so a loader
that skips one is caught); routing bias N(0, bias_std) so it changes which experts win.
Each tensor has its own generator seeded from (seed, name), so values do not depend on sharding.
"""

import argparse
import json
import os
import sys
import zlib

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402


def build_config(a):
    rotary = {}
    if a.partial_rotary_factor is not None:
        rotary["partial_rotary_factor"] = a.partial_rotary_factor
    elif a.arch == "minimax_m2":
        rotary["rotary_dim"] = a.rotary_dim if a.rotary_dim is not None else a.head_dim // 2
    common = {
        "hidden_size": a.hidden, "num_hidden_layers": a.layers, "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads, "head_dim": a.head_dim, "rope_theta": a.rope_theta,
        "rms_norm_eps": a.eps, "vocab_size": a.vocab, "num_experts_per_tok": a.top_k,
        "max_position_embeddings": a.max_pos, "tie_word_embeddings": a.tie,
        "bos_token_id": a.bos, "eos_token_id": a.eos, "hidden_act": "silu",
        "attention_dropout": 0.0, "initializer_range": 0.02, "torch_dtype": "bfloat16",
        "use_cache": True,
    }
    if a.arch == "minimax_m2":
        cfg = {
            "architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2",
            "intermediate_size": a.intermediate, "num_local_experts": a.experts,
            "scoring_func": "sigmoid", "use_routing_bias": True, "use_qk_norm": True,
            "qk_norm_type": "per_layer", "attn_type_list": [1] * a.layers,
            "shared_intermediate_size": 0, "router_jitter_noise": 0.0, "router_aux_loss_coef": 0.001,
            "output_router_logits": False,
        }
        if a.routed_scaling_factor is not None:
            cfg["routed_scaling_factor"] = a.routed_scaling_factor
        if a.mtp_layers:
            cfg.update({"use_mtp": True, "num_mtp_modules": a.mtp_layers})
    else:
        cfg = {
            "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
            "intermediate_size": a.intermediate * 4, "moe_intermediate_size": a.intermediate,
            "num_experts": a.experts, "norm_topk_prob": bool(a.norm_topk_prob),
            "decoder_sparse_step": 1, "mlp_only_layers": [], "attention_bias": False,
            "use_sliding_window": False, "sliding_window": None, "max_window_layers": a.layers,
            "rope_scaling": None, "router_aux_loss_coef": 0.001, "output_router_logits": False,
        }
    cfg.update(common)
    cfg.update(rotary)
    return dict(sorted(cfg.items()))


def tensor_specs(a):
    """[(name, dtype, shape, init)] with init one of: embed, proj(fan_in), norm, gate, bias, head."""
    H, hd = a.hidden, a.head_dim
    qw, kw = a.heads * hd, a.kv_heads * hd
    # Tied: the embedding doubles as lm_head, so it takes lm_head's scale (logit std ~2).
    embed_init = ("head", H) if a.tie else ("embed",)
    specs = [("model.embed_tokens.weight", "BF16", (a.vocab, H), embed_init),
             ("model.norm.weight", "BF16", (H,), ("norm",))]
    if not a.tie:
        specs.append(("lm_head.weight", "BF16", (a.vocab, H), ("head", H)))
    mm = a.arch == "minimax_m2"
    for i in range(a.layers):
        p = f"model.layers.{i}."
        specs += [(p + "input_layernorm.weight", "BF16", (H,), ("norm",)),
                  (p + "post_attention_layernorm.weight", "BF16", (H,), ("norm",)),
                  (p + "self_attn.q_proj.weight", "BF16", (qw, H), ("proj", H)),
                  (p + "self_attn.k_proj.weight", "BF16", (kw, H), ("proj", H)),
                  (p + "self_attn.v_proj.weight", "BF16", (kw, H), ("proj", H)),
                  (p + "self_attn.o_proj.weight", "BF16", (H, qw), ("proj", qw)),
                  (p + "self_attn.q_norm.weight", "BF16", (qw if mm else hd,), ("norm",)),
                  (p + "self_attn.k_norm.weight", "BF16", (kw if mm else hd,), ("norm",))]
        I = a.intermediate
        if mm:
            m = p + "block_sparse_moe."
            specs += [(m + "gate.weight", "F32" if a.gate_f32 else "BF16", (a.experts, H),
                       ("gate", H)),
                      (m + "e_score_correction_bias", "F32", (a.experts,), ("bias",))]
            names = ("w1", "w3", "w2")
        else:
            m = p + "mlp."
            specs.append((m + "gate.weight", "BF16", (a.experts, H), ("gate", H)))
            names = ("gate_proj", "up_proj", "down_proj")
        for e in range(a.experts):
            specs += [(f"{m}experts.{e}.{names[0]}.weight", "BF16", (I, H), ("proj", H)),
                      (f"{m}experts.{e}.{names[1]}.weight", "BF16", (I, H), ("proj", H)),
                      (f"{m}experts.{e}.{names[2]}.weight", "BF16", (H, I), ("proj", I))]
    # MTP-style extras beyond num_hidden_layers: an engine must skip them deliberately.
    for j in range(a.mtp_layers):
        p = f"model.layers.{a.layers + j}."
        specs += [(p + "enorm.weight", "BF16", (H,), ("norm",)),
                  (p + "hnorm.weight", "BF16", (H,), ("norm",)),
                  (p + "eh_proj.weight", "BF16", (H, 2 * H), ("proj", 2 * H)),
                  (p + "input_layernorm.weight", "BF16", (H,), ("norm",)),
                  (p + "self_attn.q_proj.weight", "BF16", (qw, H), ("proj", H)),
                  (p + "shared_head.norm.weight", "BF16", (H,), ("norm",))]
    return specs


def make_tensor(name, dtype, shape, init, seed, bias_std):
    g = torch.Generator().manual_seed((seed * 1_000_003 + zlib.crc32(name.encode())) % (2**63))
    kind = init[0]
    if kind == "norm":
        t = torch.rand(shape, generator=g) + 0.5
    elif kind == "bias":
        t = torch.randn(shape, generator=g) * bias_std
    else:
        gain = 1.0 if kind == "proj" else 2.0
        std = 1.0 if kind == "embed" else gain / init[1] ** 0.5
        t = torch.randn(shape, generator=g).mul_(std)
    return t.to(torch.float32 if dtype == "F32" else torch.bfloat16)


def write_checkpoint(a):
    os.makedirs(a.out, exist_ok=True)
    specs = tensor_specs(a)
    by_name = {s[0]: s for s in specs}

    def produce(name):
        n, dtype, shape, init = by_name[name]
        return make_tensor(n, dtype, shape, init, a.seed, a.bias_std)

    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(build_config(a), f, indent=2)
    with open(os.path.join(a.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": a.bos, "eos_token_id": a.eos, "do_sample": False,
                   "_from_model_config": True}, f, indent=2)
    # Remove outputs of an earlier run with another shard count, so the folder is unambiguous.
    for fn in os.listdir(a.out):
        if fn.startswith("model") and (fn.endswith(".safetensors") or fn.endswith(".index.json")):
            os.remove(os.path.join(a.out, fn))
    meta = {"format": "pt"}
    if a.shards <= 1:
        st_io.write_streaming(os.path.join(a.out, "model.safetensors"),
                              [s[:3] for s in specs], produce, meta)
        return
    # Contiguous split of the spec list into K groups of roughly equal bytes.
    sizes = [2 if s[1] == "BF16" else 4 for s in specs]
    sizes = [b * int(torch.tensor(s[2]).prod()) for b, s in zip(sizes, specs)]
    total, target = sum(sizes), sum(sizes) / a.shards
    groups, acc = [[] for _ in range(a.shards)], 0
    for s, nbytes in zip(specs, sizes):
        k = min(int(acc / target), a.shards - 1)
        groups[k].append(s)
        acc += nbytes
    weight_map = {}
    for k, group in enumerate(groups):
        fname = f"model-{k + 1:05d}-of-{a.shards:05d}.safetensors"
        st_io.write_streaming(os.path.join(a.out, fname), [s[:3] for s in group], produce, meta)
        weight_map.update({s[0]: fname for s in group})
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))},
                  f, indent=2)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--arch", choices=["minimax_m2", "qwen3_moe"], required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=16)
    rot = p.add_mutually_exclusive_group()
    rot.add_argument("--rotary-dim", type=int, default=None,
                     help="MiniMax default head_dim/2; Qwen3 default head_dim")
    rot.add_argument("--partial-rotary-factor", type=float, default=None)
    p.add_argument("--intermediate", type=int, default=32, help="per-expert intermediate size")
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--mtp-layers", type=int, default=0)
    p.add_argument("--tie", action="store_true", help="tie lm_head to embed_tokens (no lm_head)")
    p.add_argument("--rope-theta", type=float, default=5_000_000.0)
    p.add_argument("--eps", type=float, default=1e-6)
    p.add_argument("--max-pos", type=int, default=196608)
    p.add_argument("--bos", type=int, default=1)
    p.add_argument("--eos", type=int, default=2)
    p.add_argument("--bias-std", type=float, default=0.1, help="e_score_correction_bias std")
    p.add_argument("--gate-f32", action="store_true", help="store the MiniMax router weight as F32")
    p.add_argument("--routed-scaling-factor", type=float, default=None)
    p.add_argument("--norm-topk-prob", type=int, choices=[0, 1], default=1, help="Qwen3-MoE")
    a = p.parse_args(argv)
    if a.heads % a.kv_heads:
        p.error("--heads must be a multiple of --kv-heads")
    if a.arch == "qwen3_moe" and (a.rotary_dim or a.partial_rotary_factor):
        p.error("Qwen3-MoE rotates the full head (HF has no partial RoPE for it)")
    if a.top_k > a.experts:
        p.error("--top-k exceeds --experts")
    if a.bos >= a.vocab or a.eos >= a.vocab:
        a.bos, a.eos = 0, min(1, a.vocab - 1)
    return a


if __name__ == "__main__":
    write_checkpoint(parse_args())
