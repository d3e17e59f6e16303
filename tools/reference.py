#!/usr/bin/python3
"""Reference forward pass for MiniMaxM2ForCausalLM and Qwen3MoeForCausalLM (HF transformers semantics).

The C++ engine's golden tests compare against this file, so it follows the HF modeling code
(transformers' modeling_minimax_m2.py / modeling_qwen3_moe.py, eager attention) and the contract in
/work/shared/MINIMAX-M2.md. Weights always hold the checkpoint's bf16 values.

Numerics modes (--numerics):
  engine (default)  the engine's documented policy. Weights are bf16 values upcast to f32; every
                    activation is f32. The input of each linear layer (q/k/v/o projections, expert
                    w1/w3/w2, lm_head) is rounded to bf16 (round-to-nearest-even) before the matmul;
                    products and sums are f32. The router runs fully in f32 on the f32 hidden state.
                    K and V are rounded to bf16 when stored in the cache (after k-norm and RoPE).
                    RMSNorm in f32: y = w * x * rsqrt(mean(x^2) + eps). RoPE: exponent arange(0, r, 2, f32)/r, inv_freq = 1/theta**exponent
                    and cos/sin evaluated in f64 and rounded once to f32; angle = f32(pos) * inv_freq.
                    Attention softmax in f32 with scale 1/sqrt(head_dim).
  bf16              what HF transformers computes with the model in torch.bfloat16, eager attention:
                    every tensor bf16 and every op rounds to bf16; RMSNorm upcasts to f32 for the
                    variance, casts back to bf16, then multiplies by the bf16 weight (weight
                    multiply AFTER the cast, also for q_norm/k_norm); cos/sin computed in f32, cast to
                    bf16; attention softmax in f32, probabilities cast to bf16 before @V. Router:
                    HF runs F.linear in bf16 (router logits rounded to bf16, bias buffer cast to bf16),
                    then sigmoid/softmax and top-k in f32; each expert's output times its f32 routing
                    weight is rounded to bf16 and accumulated in bf16 (index_add_) in ascending expert
                    order. Note: MINIMAX-M2.md asks the engine for an f32 router; HF does not do that.
  engine-int8       the engine with --activation-dtype int8: as engine, except that the input of
                    every MXFP4 linear layer is quantized per 32-column block to int8 (d = amax/127
                    in f32, q = round-half-even(x / d) clamped to +-127; amax = 0 gives q = 0) and
                    the layer computes sum(q * d * W) (here in f64; the engine sums exact integer
                    block dot products in f32, kernels/mxfp4_i8.h). bf16 and FP8 layers as engine.
  f32               weights upcast, everything f32, no rounding anywhere.

Routing: MiniMax-M2 = sigmoid scores; e_score_correction_bias is added only to choose the top-k;
weights are the unbiased sigmoid scores of the chosen experts, renormalised, times
routed_scaling_factor (absent = 1.0). Qwen3-MoE = softmax in f32, top-k, renormalised if
norm_topk_prob. Top-k is a stable sort on (-score, index) instead of torch.topk because topk's order
among equal scores is unspecified (it differs between kernels and with sorted=False); the contract is
"ties go to the lower expert index", which the engine must reproduce bit-for-bit.
Greedy decoding: argmax with ties to the lowest token id.
"""

import argparse
import fnmatch
import json
import math
import os
import re
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402

NUMERICS = ("engine", "engine-int8", "bf16", "f32")


def bf16_round(x):
    return x.to(torch.bfloat16).to(torch.float32)


def stable_topk(scores, k):
    """Indices of the k largest scores per row; ties toward the lower index (see module doc)."""
    order = torch.sort(-scores, dim=-1, stable=True).indices
    return order[..., :k]


class QuantScheme:
    """config.json's quantization_config: which linear modules hold quantized weights, and how.

    fp8 (MiniMax-M2's release): `modules_to_not_convert` entries name a module or a dotted part
    of its name ("gate" skips "model.layers.0.block_sparse_moe.gate", not "...gate_proj").
    quark (AMD's MXFP4 export): `exclude` entries are fnmatch globs over module names.
    Only linear layers are ever quantized; embeddings, norms, router gates and biases are read as
    floats whatever the lists say.
    """

    def __init__(self, q):
        self.method = q.get("quant_method")
        if self.method == "fp8":
            if q.get("weight_block_size") != [128, 128]:
                raise ValueError(f"quantization_config.weight_block_size {q.get('weight_block_size')}"
                                 " is not [128, 128]")
            if q.get("fmt", "float8_e4m3fn") not in ("float8_e4m3fn", "e4m3"):
                raise ValueError(f"quantization_config.fmt {q.get('fmt')} is not float8_e4m3fn")
            self.skip = list(q.get("modules_to_not_convert") or [])
        elif self.method == "quark":
            w = (q.get("global_quant_config") or {}).get("weight") or {}
            want = {"dtype": "fp4", "qscheme": "per_group", "group_size": 32, "scale_format": "e8m0"}
            for k, v in want.items():
                if w.get(k) != v:
                    raise ValueError(f"quantization_config.global_quant_config.weight.{k} is "
                                     f"{w.get(k)!r}, only {v!r} is supported")
            if q.get("layer_quant_config"):
                raise ValueError("quantization_config.layer_quant_config overrides are not supported")
            self.skip = list(q.get("exclude") or [])
        else:
            raise ValueError(f"quantization_config.quant_method {self.method!r} is not supported")

    def quantized(self, module):
        if self.method == "fp8":
            parts = module.split(".")
            return not any(e == module or e in [".".join(parts[i:j]) for i in range(len(parts))
                                               for j in range(i + 1, len(parts) + 1)]
                           for e in self.skip)
        return not any(fnmatch.fnmatchcase(module, e) for e in self.skip)


def _e4m3_table():
    vals = []
    for c in range(256):
        e, m = (c >> 3) & 15, c & 7
        v = m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
        vals.append(float("nan") if (c & 0x7F) == 0x7F else (-v if c & 0x80 else v))
    return torch.tensor(vals, dtype=torch.float32)  # every value exact in f32


E4M3 = _e4m3_table()
E2M1 = torch.tensor([0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6], dtype=torch.float32)


def dequant_fp8_block(codes, scale_inv):
    """W[i, j] = e4m3(codes[i, j]) * scale_inv[i // 128, j // 128]: one f32 multiplication."""
    out, inn = codes.shape
    s = scale_inv.repeat_interleave(128, 0).repeat_interleave(128, 1)[:out, :inn]
    return E4M3[codes.long()] * s


def dequant_mxfp4(packed, scales):
    """W[i, j] = e2m1(nibble j of row i) * 2^(scales[i, j // 32] - 127): exact in f32."""
    if bool((scales == 255).any()):
        raise ValueError("e8m0 scale 255 (NaN)")
    p = packed.long()
    codes = torch.stack([p & 15, p >> 4], dim=-1).reshape(p.shape[0], -1)  # element 2i = low nibble
    # 2^(s - 127) built from its f32 bits (s << 23; s = 0 is the subnormal 2^-127 = 0x00400000),
    # so no pow() rounding can creep in; e2m1 * 2^k is then one exact f32 multiplication.
    bits = torch.where(scales == 0, torch.tensor(0x00400000), scales.long() << 23).to(torch.int32)
    scale = bits.view(torch.float32).repeat_interleave(32, 1)
    return E2M1[codes] * scale


def q8_dequant(x):
    """x [..., K] f32 quantized per 32 columns to int8 (kernels/mxfp4_i8.h), returned as q * d (f64)."""
    blocks = x.reshape(*x.shape[:-1], -1, 32)
    amax = blocks.abs().amax(-1, keepdim=True)
    d = amax / torch.tensor(127.0, dtype=torch.float32)
    safe = torch.where(d == 0, torch.ones_like(d), d)
    q = torch.where(d == 0, torch.zeros_like(blocks), torch.round(blocks / safe).clamp(-127, 127))
    return (q.double() * d.double()).reshape(x.shape)


def argmax_lowest(row):
    return int(torch.nonzero(row == row.max())[0, 0])


class Config:
    def __init__(self, d):
        self.raw = d
        self.model_type = d["model_type"]
        if self.model_type not in ("minimax_m2", "qwen3_moe"):
            raise ValueError(f"unsupported model_type {self.model_type}")
        self.minimax = self.model_type == "minimax_m2"
        self.hidden = d["hidden_size"]
        self.layers = d["num_hidden_layers"]
        self.heads = d["num_attention_heads"]
        self.kv_heads = d.get("num_key_value_heads", self.heads)
        self.head_dim = d.get("head_dim") or self.hidden // self.heads
        rope = d.get("rope_parameters") or {}
        self.theta = float(d.get("rope_theta", rope.get("rope_theta", 10000.0)))
        if d.get("rotary_dim") is not None:
            self.rotary_dim = int(d["rotary_dim"])
        else:
            prf = d.get("partial_rotary_factor", rope.get("partial_rotary_factor", 1.0))
            self.rotary_dim = int(self.head_dim * prf)
        if self.rotary_dim % 2 or self.rotary_dim > self.head_dim:
            raise ValueError(f"bad rotary_dim {self.rotary_dim}")
        scaling = d.get("rope_scaling")
        if scaling and scaling.get("rope_type", scaling.get("type")) not in (None, "default"):
            raise ValueError(f"rope scaling {scaling} not supported")
        self.eps = float(d["rms_norm_eps"])
        self.vocab = d["vocab_size"]
        self.top_k = d["num_experts_per_tok"]
        self.tie = bool(d.get("tie_word_embeddings", False))
        if self.minimax:
            self.experts = d["num_local_experts"]
            self.inter = d["intermediate_size"]
            if d.get("scoring_func", "sigmoid") != "sigmoid":
                raise ValueError("only sigmoid scoring is implemented for MiniMax-M2")
            if not d.get("use_qk_norm", True) or d.get("qk_norm_type", "per_layer") != "per_layer":
                raise ValueError("MiniMax-M2 needs use_qk_norm with qk_norm_type per_layer")
            if any(t != 1 for t in d.get("attn_type_list", [1])):
                raise ValueError("only full-attention layers (attn_type 1) are implemented")
            self.use_bias = bool(d.get("use_routing_bias", True))
            self.scaling_factor = float(d.get("routed_scaling_factor") or 1.0)
        else:
            self.experts = d["num_experts"]
            self.inter = d["moe_intermediate_size"]
            self.norm_topk = bool(d.get("norm_topk_prob", False))
            if d.get("decoder_sparse_step", 1) != 1 or d.get("mlp_only_layers"):
                raise ValueError("dense Qwen3-MoE layers are not implemented")
            if d.get("use_sliding_window"):
                raise ValueError("sliding window is not implemented")


class Model:
    def __init__(self, folder, numerics="engine"):
        if numerics not in NUMERICS:
            raise ValueError(f"numerics must be one of {NUMERICS}")
        self.numerics = numerics
        with open(os.path.join(folder, "config.json")) as f:
            self.cfg = Config(json.load(f))
        self.ckpt = st_io.Checkpoint(folder)
        q = self.cfg.raw.get("quantization_config")
        self.quant = QuantScheme(q) if q else None
        self.dtype = torch.bfloat16 if numerics == "bf16" else torch.float32
        self.trace = None  # dict name -> tensor while tracing (see --dump-dir)
        self.int8_inputs = set()  # id() of the MXFP4 weights whose inputs are int8 (engine-int8)
        self._load()

    # ---- loading (strict: every expected tensor, exact shape) ----
    def _get(self, name, shape, dtype=None):
        if name not in self.ckpt.where:
            raise KeyError(f"checkpoint lacks {name}")
        t = self.ckpt.get(name)
        if tuple(t.shape) != tuple(shape):
            raise ValueError(f"{name}: shape {tuple(t.shape)}, expected {tuple(shape)}")
        if not t.is_floating_point():
            raise ValueError(f"{name}: dtype {t.dtype} (quantized checkpoints are not supported)")
        self.used.add(name)
        return t.to(dtype or self.dtype)

    def _raw(self, name, dtype, shape):
        if name not in self.ckpt.where:
            raise KeyError(f"checkpoint lacks {name}")
        found = self.ckpt.info(name)
        if found != (dtype, tuple(shape)):
            raise ValueError(f"{name}: {found[0]} {list(found[1])}, expected {dtype} {list(shape)}")
        self.used.add(name)
        return self.ckpt.get(name)

    def _linear(self, name, shape):
        """A linear weight [out, in]; quantized ones are dequantized exactly to f32 first."""
        module = name[:-len(".weight")]
        if self.quant is None or not self.quant.quantized(module):
            return self._get(name, shape)
        out, inn = shape
        if self.quant.method == "fp8":
            w = dequant_fp8_block(self._raw(name, "F8_E4M3", shape),
                                  self._raw(module + ".weight_scale_inv", "F32",
                                            (-(-out // 128), -(-inn // 128))))
        else:
            if inn % 32:
                raise ValueError(f"{name}: MXFP4 input dim {inn} is not a multiple of 32")
            w = dequant_mxfp4(self._raw(name, "U8", (out, inn // 2)),
                              self._raw(module + ".weight_scale", "U8", (out, inn // 32)))
            if self.numerics == "engine-int8":
                self.int8_inputs.add(id(w))
        return w.to(self.dtype)

    def _load(self):
        c, self.used = self.cfg, set()
        H, hd = c.hidden, c.head_dim
        qw, kw = c.heads * hd, c.kv_heads * hd
        self.embed = self._get("model.embed_tokens.weight", (c.vocab, H))
        self.norm = self._get("model.norm.weight", (H,))
        if "lm_head.weight" in self.ckpt.where or not c.tie:
            self.lm_head = self._linear("lm_head.weight", (c.vocab, H))
        else:
            self.lm_head = self.embed
        self.layer_w = []
        for i in range(c.layers):
            p = f"model.layers.{i}."
            L = {"in_norm": self._get(p + "input_layernorm.weight", (H,)),
                 "post_norm": self._get(p + "post_attention_layernorm.weight", (H,)),
                 "q": self._linear(p + "self_attn.q_proj.weight", (qw, H)),
                 "k": self._linear(p + "self_attn.k_proj.weight", (kw, H)),
                 "v": self._linear(p + "self_attn.v_proj.weight", (kw, H)),
                 "o": self._linear(p + "self_attn.o_proj.weight", (H, qw)),
                 "q_norm": self._get(p + "self_attn.q_norm.weight", (qw if c.minimax else hd,)),
                 "k_norm": self._get(p + "self_attn.k_norm.weight", (kw if c.minimax else hd,))}
            if c.minimax:
                m, names = p + "block_sparse_moe.", ("w1", "w3", "w2")
            else:
                m, names = p + "mlp.", ("gate_proj", "up_proj", "down_proj")
            # HF keeps the router in the model dtype; engine/f32 modes use it in f32.
            L["gate"] = self._get(m + "gate.weight", (c.experts, H))
            if c.minimax and c.use_bias:
                L["bias"] = self._get(m + "e_score_correction_bias", (c.experts,))
            L["w1"] = [self._linear(f"{m}experts.{e}.{names[0]}.weight", (c.inter, H))
                       for e in range(c.experts)]
            L["w3"] = [self._linear(f"{m}experts.{e}.{names[1]}.weight", (c.inter, H))
                       for e in range(c.experts)]
            L["w2"] = [self._linear(f"{m}experts.{e}.{names[2]}.weight", (H, c.inter))
                       for e in range(c.experts)]
            self.layer_w.append(L)
        for name in sorted(set(self.ckpt.keys()) - self.used):
            m = re.match(r"model\.layers\.(\d+)\.", name)
            if m and int(m.group(1)) >= c.layers:
                continue  # MTP modules (layers >= num_hidden_layers) are deliberately unused
            print(f"reference: warning: unused tensor {name}", file=sys.stderr)

    def _rec(self, name, t):
        if self.trace is not None:
            t = t.detach()
            self.trace[name] = t.float().clone() if t.is_floating_point() else t.to(torch.int32)

    # ---- building blocks ----
    def rmsnorm(self, x, w):
        # HF: normalise in f32, cast back to the activation dtype, then multiply by the weight.
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.cfg.eps)
        return w * y.to(x.dtype)

    def linear(self, x, w):
        if id(w) in self.int8_inputs:
            return F.linear(q8_dequant(x).double(), w.double()).float()
        if self.numerics.startswith("engine"):
            x = bf16_round(x)
        return F.linear(x, w)

    def rope(self, x, positions):
        """x [..., T, head_dim]; NeoX rotation of the first rotary_dim dims."""
        r = self.cfg.rotary_dim
        exponent = torch.arange(0, r, 2, dtype=torch.float32) / r
        if self.numerics == "bf16":
            # HF: f32 pow and f32 cos/sin (torch's vectorised f32 cos/sin are off by 1 ulp at
            # some angles), cast to the activation dtype.
            inv_freq = 1.0 / (self.cfg.theta ** exponent)
            freqs = positions.to(torch.float32)[:, None] * inv_freq[None, :]
            emb = torch.cat([freqs, freqs], dim=-1)
            cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        else:
            # Engine policy: the same f32 exponent and f32 angle as HF, but pow and cos/sin
            # evaluated in f64 and rounded once to f32, so both implementations get the correctly
            # rounded value (a 1-ulp cos difference flips bf16-rounded K elements downstream).
            inv_freq = (1.0 / (float(self.cfg.theta) ** exponent.to(torch.float64))).to(torch.float32)
            freqs = positions.to(torch.float32)[:, None] * inv_freq[None, :]
            emb = torch.cat([freqs, freqs], dim=-1).to(torch.float64)
            cos, sin = emb.cos().to(torch.float32), emb.sin().to(torch.float32)
        xr, xp = x[..., :r], x[..., r:]
        half = r // 2
        rot = torch.cat([-xr[..., half:], xr[..., :half]], dim=-1)
        return torch.cat([xr * cos + rot * sin, xp], dim=-1)

    def attention(self, x, L, li, positions, cache):
        c, T = self.cfg, x.shape[0]
        hd = c.head_dim
        q, k, v = self.linear(x, L["q"]), self.linear(x, L["k"]), self.linear(x, L["v"])
        if c.minimax:  # one RMS over the full q (k) width, before splitting into heads
            q, k = self.rmsnorm(q, L["q_norm"]), self.rmsnorm(k, L["k_norm"])
        q = q.view(T, c.heads, hd).transpose(0, 1)
        k = k.view(T, c.kv_heads, hd).transpose(0, 1)
        v = v.view(T, c.kv_heads, hd).transpose(0, 1)
        if not c.minimax:  # Qwen3: per-head RMSNorm over head_dim, before RoPE
            q, k = self.rmsnorm(q, L["q_norm"]), self.rmsnorm(k, L["k_norm"])
        q, k = self.rope(q, positions), self.rope(k, positions)
        if self.numerics.startswith("engine"):  # the cache holds bf16
            k, v = bf16_round(k), bf16_round(v)
        self._rec(f"layer{li}.q", q)  # [heads, T, head_dim], after norm and RoPE
        self._rec(f"layer{li}.k", k)
        self._rec(f"layer{li}.v", v)
        if cache[li] is not None:
            k = torch.cat([cache[li][0], k], dim=1)
            v = torch.cat([cache[li][1], v], dim=1)
        cache[li] = (k, v)
        group = c.heads // c.kv_heads
        k = k.repeat_interleave(group, dim=0)
        v = v.repeat_interleave(group, dim=0)
        scores = torch.matmul(q, k.transpose(1, 2)) * (hd ** -0.5)
        S = k.shape[1]
        key_pos = torch.arange(S)
        mask = key_pos[None, :] > positions[:, None]  # causal: key position after query position
        scores = scores.masked_fill(mask[None], float("-inf"))
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(x.dtype)
        out = torch.matmul(probs, v).transpose(0, 1).reshape(T, c.heads * hd)
        return self.linear(out, L["o"])

    def route(self, x, L):
        """Returns (expert indices [T, k], weights [T, k] f32)."""
        c = self.cfg
        if self.numerics == "bf16":
            logits = F.linear(x, L["gate"]).float()
        else:
            logits = F.linear(x.float(), L["gate"].float())
        if c.minimax:
            scores = torch.sigmoid(logits)
            choice = scores + L["bias"].float() if c.use_bias else scores
            idx = stable_topk(choice, c.top_k)
            w = scores.gather(1, idx)
            w = w / w.sum(-1, keepdim=True) * c.scaling_factor
        else:
            probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
            idx = stable_topk(probs, c.top_k)
            w = probs.gather(1, idx)
            if c.norm_topk:
                w = w / w.sum(-1, keepdim=True)
        return idx, w

    def moe(self, x, L, li=0):
        idx, w = self.route(x, L)
        self._rec(f"layer{li}.expert_ids", idx)
        self._rec(f"layer{li}.expert_weights", w)
        out = torch.zeros_like(x)
        for e in torch.unique(idx).tolist():  # ascending expert order, as HF accumulates
            tok, slot = torch.nonzero(idx == e, as_tuple=True)
            xe = x[tok]
            h = F.silu(self.linear(xe, L["w1"][e])) * self.linear(xe, L["w3"][e])
            y = self.linear(h, L["w2"][e]) * w[tok, slot, None]
            out.index_add_(0, tok, y.to(out.dtype))
        return out

    # ---- public API ----
    def new_cache(self):
        return [None] * self.cfg.layers

    @torch.no_grad()
    def forward(self, ids, cache):
        """Runs ids (list of int) after what the cache already holds; returns f32 logits [T, vocab]."""
        start = 0 if cache[0] is None else cache[0][0].shape[1]
        ids_t = torch.tensor(ids, dtype=torch.long)
        if int(ids_t.min()) < 0 or int(ids_t.max()) >= self.cfg.vocab:
            raise ValueError("token id out of range")
        positions = torch.arange(start, start + len(ids))
        h = self.embed[ids_t]
        self._rec("embed", h)
        for li, L in enumerate(self.layer_w):
            a = self.rmsnorm(h, L["in_norm"])
            self._rec(f"layer{li}.attn_in", a)
            a = self.attention(a, L, li, positions, cache)
            self._rec(f"layer{li}.attn_out", a)
            h = h + a
            m = self.rmsnorm(h, L["post_norm"])
            self._rec(f"layer{li}.moe_in", m)
            m = self.moe(m, L, li)
            self._rec(f"layer{li}.moe_out", m)
            h = h + m
            self._rec(f"layer{li}.out", h)
        h = self.rmsnorm(h, self.norm)
        self._rec("final_norm", h)
        return self.linear(h, self.lm_head).float()

    def generate(self, prompt, max_tokens, use_cache=True):
        """Greedy. Returns (prompt logits [T, vocab], generated ids)."""
        cache = self.new_cache()
        prompt_logits = self.forward(list(prompt), cache)
        out, last = [], prompt_logits[-1]
        for i in range(max_tokens):
            out.append(argmax_lowest(last))
            if i + 1 == max_tokens:
                break
            if use_cache:
                last = self.forward([out[-1]], cache)[-1]
            else:
                last = self.forward(list(prompt) + out, self.new_cache())[-1]
        return prompt_logits, out


def main(argv=None):
    p = argparse.ArgumentParser(description="HF-semantics reference forward for MoE checkpoints")
    p.add_argument("--model", required=True, help="checkpoint folder")
    p.add_argument("--prompt-ids", action="append", required=True,
                   help="comma-separated token ids; repeat for several independent sequences")
    p.add_argument("--max-tokens", type=int, default=0, help="greedy tokens to generate per sequence")
    p.add_argument("--logits-out", help="write f32 prompt logits [sum T, vocab] to this .npy")
    p.add_argument("--numerics", choices=NUMERICS, default="engine")
    p.add_argument("--no-cache", action="store_true", help="recompute the whole sequence per token")
    p.add_argument("--json", action="store_true", help="print only the JSON result")
    p.add_argument("--dump-dir", help="write the first sequence's prompt-pass intermediates "
                   "(embed, per layer attn_in/q/k/v/attn_out/moe_in/expert_ids/expert_weights/"
                   "moe_out/out, final_norm) as NAME.npy here, for debugging engine mismatches")
    a = p.parse_args(argv)
    prompts = [[int(t) for t in s.split(",") if t.strip()] for s in a.prompt_ids]
    if any(not pr for pr in prompts):
        p.error("empty --prompt-ids")
    model = Model(a.model, a.numerics)
    all_logits, token_ids = [], []
    for i, pr in enumerate(prompts):
        if a.dump_dir and i == 0:
            os.makedirs(a.dump_dir, exist_ok=True)
            model.trace = {}
            model.forward(pr, model.new_cache())
            for name, t in model.trace.items():
                np.save(os.path.join(a.dump_dir, name + ".npy"), t.numpy())
            model.trace = None
        logits, gen = model.generate(pr, a.max_tokens, use_cache=not a.no_cache)
        all_logits.append(logits)
        token_ids.append(gen)
    if a.logits_out:
        np.save(a.logits_out, torch.cat(all_logits).numpy().astype(np.float32))
    result = {"token_ids": token_ids}
    if not a.json:
        result.update({"numerics": a.numerics, "prompt_lengths": [len(pr) for pr in prompts],
                       "vocab": model.cfg.vocab})
    print(json.dumps(result))


if __name__ == "__main__":
    main()
