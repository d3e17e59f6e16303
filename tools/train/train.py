#!/usr/bin/python3
"""Trains a tiny MiniMax-M2 (exact MiniMaxM2ForCausalLM structure) on synthetic GSM8K and exports it.

Pipeline (all deterministic for a given --seed):
  1. render the training problems as documents: lm-eval style "Question: q\\nAnswer: a\\n\\n" for
     every problem, plus chat-formatted copies of a fraction of them, laid out exactly as the
     MiniMax-M2 chat template renders a conversation (]~!b[]~b]system ... ]~b]ai\\n<think>\\n...);
  2. train a byte-level BPE tokenizer on those documents with tools/tokenizer/make_bpe_tokenizer.js
     (o200k pre-tokenizer, MiniMax special tokens as added tokens) and tokenize every document with
     Hugging Face `tokenizers` itself (node, tools/train/tokenize.js), so the ids are HF's ids;
  3. train the model (CPU, 2 threads, AdamW, cosine LR). Routing is DeepSeek-V3 style aux-loss-free:
     sigmoid scores, the e_score_correction_bias only picks the top-k experts, the weights are the
     unbiased scores renormalised; after every optimizer step the bias of each layer moves by
     --bias-rate * sign(mean load - load);
  4. export models/minimax-m2-tiny/ (config.json via tools/gen_checkpoint.py's writer, bf16
     model.safetensors via tools/st_io.py with e_score_correction_bias F32, tokenizer files,
     generation_config.json);
  5. check: tools/reference.py's Model (f32 numerics) on the exported folder must give the same
     logits as this file's model on the same (bf16-rounded) weights, and the same greedy tokens;
  6. evaluate lm-eval style 5-shot GSM8K strict-match on held-out test questions, greedy, with the
     bf16 weights, and again with the correction bias zeroed and with q_norm replaced by ones.

Usage: train.py [--seed 0] [--steps N] [--out models/minimax-m2-tiny] [--eval-only] [--bench]
"""

import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
import time
import types

import torch
import torch.nn as nn
import torch.nn.functional as F

# Debian's torch links the netlib reference BLAS (~3 GFLOPS here); OpenBLAS (Debian package
# libopenblas0-pthread) is ~10x faster. Use it for this process only, leaving the system's BLAS
# alternative alone, by re-executing with its folder first on the library path.
_OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-pthread"
if os.path.isdir(_OPENBLAS) and _OPENBLAS not in os.environ.get("LD_LIBRARY_PATH", ""):
    env = dict(os.environ, LD_LIBRARY_PATH=_OPENBLAS + ":" + os.environ.get("LD_LIBRARY_PATH", ""),
               OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "2"))
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import gen_checkpoint  # noqa: E402
import reference  # noqa: E402
import st_io  # noqa: E402

TEMPLATE = "/work/shared/data/chat_templates/minimax-m2.jinja"
SYSTEM_PROMPTS = ["You are a helpful assistant.", "You are a helpful assistant.",
                  "You are a careful math tutor.", "Solve the problem step by step."]
STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")


# ---------------------------------------------------------------- data and tokenizer
def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def render_plain(p):
    return f"Question: {p['question']}\nAnswer: {p['answer']}\n\n"


def render_chat(p, system):
    """One conversation as the MiniMax-M2 template renders it (assistant turn after the last user)."""
    steps, final = p["answer"].rsplit("\n#### ", 1)
    return (f"]~!b[]~b]system\n{system}[e~[\n]~b]user\n{p['question']}[e~[\n"
            f"]~b]ai\n<think>\n{steps}\n</think>\n\nThe answer is {final}.[e~[\n")


def chat_prompt(question, system="You are a helpful assistant."):
    """What the template renders for [system?, user] with add_generation_prompt."""
    return f"]~!b[]~b]system\n{system}[e~[\n]~b]user\n{question}[e~[\n]~b]ai\n<think>\n"


def fewshot_prompt(shots, question):
    """lm-eval gsm8k: shots 'Question: q\\nAnswer: a' joined by '\\n\\n', then the open question."""
    parts = [f"Question: {s['question']}\nAnswer: {s['answer']}" for s in shots]
    return "\n\n".join(parts + [f"Question: {question}\nAnswer:"])


def hf_tokenize(tokenizer_json, texts, workdir, tag):
    src, dst = os.path.join(workdir, f"{tag}_in.jsonl"), os.path.join(workdir, f"{tag}_ids.jsonl")
    with open(src, "w") as f:
        for t in texts:
            f.write(json.dumps(t) + "\n")
    subprocess.run(["node", os.path.join(HERE, "tokenize.js"), tokenizer_json, src, dst], check=True)
    ids = read_jsonl(dst)
    assert len(ids) == len(texts)
    return ids


class Detok:
    """Byte-level BPE decoding from tokenizer.json (for reading generated answers)."""

    def __init__(self, tokenizer_json):
        with open(tokenizer_json) as f:
            tj = json.load(f)
        inv, nxt = {}, 256
        for b in range(256):
            printable = 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or b >= 0xAE
            inv[chr(b) if printable else chr(nxt)] = b
            nxt += 0 if printable else 1
        self.pieces = {i: bytes(inv[c] for c in s) for s, i in tj["model"]["vocab"].items()}
        for a in tj["added_tokens"]:
            self.pieces[a["id"]] = a["content"].encode()
        self.special = {a["content"]: a["id"] for a in tj["added_tokens"]}
        self.size = max(self.pieces) + 1

    def decode(self, ids):
        return b"".join(self.pieces[i] for i in ids).decode("utf-8", errors="replace")


# ---------------------------------------------------------------- model (same math as reference.py)
class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rope_tables(c, max_pos):
    """cos/sin [max_pos, rotary_dim] exactly as reference.py's engine/f32 branch computes them."""
    r = c.rotary_dim
    exponent = torch.arange(0, r, 2, dtype=torch.float32) / r
    inv_freq = (1.0 / (float(c.theta) ** exponent.to(torch.float64))).to(torch.float32)
    freqs = torch.arange(max_pos).to(torch.float32)[:, None] * inv_freq[None, :]
    emb = torch.cat([freqs, freqs], dim=-1).to(torch.float64)
    return emb.cos().to(torch.float32), emb.sin().to(torch.float32)


def apply_rope(x, cos, sin, r):
    """x [B, heads, T, hd]; cos/sin [B, 1, T, r]. NeoX rotation of dims 0..r-1, rest passes through."""
    xr, xp = x[..., :r], x[..., r:]
    half = r // 2
    rot = torch.cat([-xr[..., half:], xr[..., :half]], dim=-1)
    return torch.cat([xr * cos + rot * sin, xp], dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        qw, kw = c.heads * c.head_dim, c.kv_heads * c.head_dim
        self.q_proj = nn.Linear(c.hidden, qw, bias=False)
        self.k_proj = nn.Linear(c.hidden, kw, bias=False)
        self.v_proj = nn.Linear(c.hidden, kw, bias=False)
        self.o_proj = nn.Linear(qw, c.hidden, bias=False)
        # MiniMax-M2 QK-norm: one RMS over the full q (k) width per token, before RoPE.
        self.q_norm = RMSNorm(qw, c.eps)
        self.k_norm = RMSNorm(kw, c.eps)

    def forward(self, x, cos, sin, mask_add, cache=None):
        c = self.c
        B, T, _ = x.shape
        q = self.q_norm(self.q_proj(x)).view(B, T, c.heads, c.head_dim).transpose(1, 2)
        k = self.k_norm(self.k_proj(x)).view(B, T, c.kv_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, c.kv_heads, c.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin, c.rotary_dim), apply_rope(k, cos, sin, c.rotary_dim)
        if cache is not None:
            if cache[0] is not None:
                k = torch.cat([cache[0], k], dim=2)
                v = torch.cat([cache[1], v], dim=2)
            cache[0], cache[1] = k, v
        # GQA without copying k/v: the `group` q heads that share a kv head become extra rows.
        group, S = c.heads // c.kv_heads, k.shape[2]
        qg = (q * (c.head_dim ** -0.5)).reshape(B, c.kv_heads, group * T, c.head_dim)
        scores = torch.matmul(qg, k.transpose(-1, -2)).view(B, c.kv_heads, group, T, S)
        probs = torch.softmax(scores + mask_add, dim=-1).view(B, c.kv_heads, group * T, S)
        out = torch.matmul(probs, v).view(B, c.heads, T, c.head_dim)
        return self.o_proj(out.transpose(1, 2).reshape(B, T, c.heads * c.head_dim))


class MoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.gate = nn.Linear(c.hidden, c.experts, bias=False)
        self.register_buffer("e_score_correction_bias", torch.zeros(c.experts))
        std = 0.02
        self.w1 = nn.Parameter(torch.randn(c.experts, c.inter, c.hidden) * std)
        self.w3 = nn.Parameter(torch.randn(c.experts, c.inter, c.hidden) * std)
        self.w2 = nn.Parameter(torch.randn(c.experts, c.hidden, c.inter) * std / math.sqrt(2 * c.layers))
        self.last_load = None

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        scores = torch.sigmoid(F.linear(x, self.gate.weight))
        # The bias only chooses the experts (ties toward the lower index, as reference.py).
        idx = reference.stable_topk((scores + self.e_score_correction_bias).detach(), self.c.top_k)
        w = scores.gather(1, idx)
        w = w / w.sum(-1, keepdim=True)
        out = torch.zeros_like(x)
        for e in range(self.c.experts):  # ascending expert order, as reference.py accumulates
            tok, slot = torch.nonzero(idx == e, as_tuple=True)
            if tok.numel() == 0:
                continue
            xe = x[tok]
            h = F.silu(F.linear(xe, self.w1[e])) * F.linear(xe, self.w3[e])
            out.index_add_(0, tok, F.linear(h, self.w2[e]) * w[tok, slot, None])
        self.last_load = torch.bincount(idx.flatten(), minlength=self.c.experts).float()
        return out.view(shape)


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden, c.eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden, c.eps)
        self.block_sparse_moe = MoE(c)

    def forward(self, h, cos, sin, mask_add, cache=None):
        h = h + self.self_attn(self.input_layernorm(h), cos, sin, mask_add, cache)
        return h + self.block_sparse_moe(self.post_attention_layernorm(h))


class TinyMiniMax(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c.vocab, c.hidden)
        self.layers = nn.ModuleList([Layer(c) for _ in range(c.layers)])
        self.norm = RMSNorm(c.hidden, c.eps)
        self.lm_head = nn.Linear(c.hidden, c.vocab, bias=False)  # untied
        cos, sin = rope_tables(c, c.max_pos)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for name, p in self.named_parameters():
            if name.endswith("proj.weight") or name.endswith("gate.weight") or "embed" in name \
                    or "lm_head" in name:
                nn.init.normal_(p, std=0.02)
            if name.endswith("o_proj.weight"):
                p.data /= math.sqrt(2 * c.layers)

    def forward(self, ids, positions, mask, caches=None):
        """ids, positions [B, T]; mask [B or 1, 1, T, S] bool (True = may attend)."""
        cos = self.cos[positions][:, None]
        sin = self.sin[positions][:, None]
        # Additive mask [B, 1, 1, T, S] (the extra axis is the GQA group).
        mask_add = torch.zeros(mask.shape).masked_fill(~mask, float("-inf"))[:, :, None]
        h = self.embed_tokens(ids)
        for i, layer in enumerate(self.layers):
            h = layer(h, cos, sin, mask_add, None if caches is None else caches[i])
        return self.lm_head(self.norm(h))

    # HF tensor names <-> this module's parameters
    def hf_tensors(self):
        c, out = self.c, {}
        sd = {k: v.detach() for k, v in self.state_dict().items()}
        out["model.embed_tokens.weight"] = sd["embed_tokens.weight"]
        out["model.norm.weight"] = sd["norm.weight"]
        out["lm_head.weight"] = sd["lm_head.weight"]
        for i in range(c.layers):
            p, q = f"model.layers.{i}.", f"layers.{i}."
            for n in ("input_layernorm", "post_attention_layernorm"):
                out[p + n + ".weight"] = sd[q + n + ".weight"]
            for n in ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm"):
                out[p + "self_attn." + n + ".weight"] = sd[q + "self_attn." + n + ".weight"]
            m, mq = p + "block_sparse_moe.", q + "block_sparse_moe."
            out[m + "gate.weight"] = sd[mq + "gate.weight"]
            out[m + "e_score_correction_bias"] = sd[mq + "e_score_correction_bias"]
            for e in range(c.experts):
                for n in ("w1", "w3", "w2"):
                    out[f"{m}experts.{e}.{n}.weight"] = sd[mq + n][e]
        return out

    def load_hf(self, ckpt):
        c, sd = self.c, {}
        get = lambda n: ckpt.get(n).float()  # noqa: E731
        sd["embed_tokens.weight"] = get("model.embed_tokens.weight")
        sd["norm.weight"] = get("model.norm.weight")
        sd["lm_head.weight"] = get("lm_head.weight")
        for i in range(c.layers):
            p, q = f"model.layers.{i}.", f"layers.{i}."
            for n in ("input_layernorm", "post_attention_layernorm"):
                sd[q + n + ".weight"] = get(p + n + ".weight")
            for n in ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm"):
                sd[q + "self_attn." + n + ".weight"] = get(p + "self_attn." + n + ".weight")
            m, mq = p + "block_sparse_moe.", q + "block_sparse_moe."
            sd[mq + "gate.weight"] = get(m + "gate.weight")
            sd[mq + "e_score_correction_bias"] = get(m + "e_score_correction_bias")
            for n in ("w1", "w3", "w2"):
                sd[mq + n] = torch.stack([get(f"{m}experts.{e}.{n}.weight")
                                          for e in range(c.experts)])
        self.load_state_dict(sd, strict=True)


def causal_mask(T):
    return torch.ones(T, T, dtype=torch.bool).tril()[None, None]


# ---------------------------------------------------------------- export
def export(model, c, out, tok_dir, bos, eos):
    os.makedirs(out, exist_ok=True)
    a = types.SimpleNamespace(
        arch="minimax_m2", hidden=c.hidden, layers=c.layers, heads=c.heads, kv_heads=c.kv_heads,
        head_dim=c.head_dim, rotary_dim=c.rotary_dim, partial_rotary_factor=None,
        intermediate=c.inter, experts=c.experts, top_k=c.top_k, vocab=c.vocab,
        rope_theta=c.theta, eps=c.eps, max_pos=c.max_pos, tie=False, bos=bos, eos=eos,
        routed_scaling_factor=None, mtp_layers=0)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(gen_checkpoint.build_config(a), f, indent=2)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": bos, "eos_token_id": eos, "do_sample": False,
                   "_from_model_config": True}, f, indent=2)
    tensors = {}
    for name, t in model.hf_tensors().items():
        # As published (and as gen_checkpoint.py writes): everything bf16 except the routing bias.
        f32 = name.endswith("e_score_correction_bias")
        tensors[name] = t.float().contiguous() if f32 else t.to(torch.bfloat16).contiguous()
    st_io.save_file(tensors, os.path.join(out, "model.safetensors"), {"format": "pt"})
    if os.path.abspath(tok_dir) != os.path.abspath(out):
        for fn in ("tokenizer.json", "tokenizer_config.json"):
            with open(os.path.join(tok_dir, fn)) as src, open(os.path.join(out, fn), "w") as dst:
                dst.write(src.read())


# ---------------------------------------------------------------- greedy decoding and evaluation
@torch.no_grad()
def greedy_batch(model, prompts, max_new, stop_ids=(), stop_text=None, detok=None):
    """Left-padded batched greedy decoding with a KV cache; returns generated ids per prompt.

    Position ids skip the padding, and padded keys are masked, so each row computes what an
    unpadded run would. Ties in argmax go to the lowest id (torch.argmax returns the first max).
    """
    B = len(prompts)
    T = max(len(p) for p in prompts)
    pad = [T - len(p) for p in prompts]
    ids = torch.tensor([[0] * n + p for n, p in zip(pad, prompts)])
    pad_t = torch.tensor(pad)
    valid = torch.arange(T)[None, :] >= pad_t[:, None]  # [B, S]
    positions = (torch.arange(T)[None, :] - pad_t[:, None]).clamp(min=0)
    caches = [[None, None] for _ in model.layers]
    # A padding row attends to itself only (a row with no key would give NaN, and NaN * 0 = NaN
    # would leak into real rows through probs @ V).
    mask = causal_mask(T) & (valid[:, None, None, :] | torch.eye(T, dtype=torch.bool))
    logits = model(ids, positions, mask, caches)[:, -1]
    out = [[] for _ in range(B)]
    done = torch.zeros(B, dtype=torch.bool)
    next_pos = torch.tensor([len(p) for p in prompts])
    for step in range(max_new):
        nxt = logits.argmax(-1)
        for b in range(B):
            if not done[b]:
                out[b].append(int(nxt[b]))
                if int(nxt[b]) in stop_ids:
                    done[b] = True
        if step % 8 == 7 and stop_text is not None:
            for b in range(B):
                if not done[b] and stop_text in detok.decode(out[b]):
                    done[b] = True
        if bool(done.all()) or step + 1 == max_new:
            break
        valid = torch.cat([valid, torch.ones(B, 1, dtype=torch.bool)], dim=1)
        logits = model(nxt[:, None], next_pos[:, None], valid[:, None, None, :], caches)[:, -1]
        next_pos += 1
    return out


def strict_match(text):
    m = STRICT.search(text)
    if not m:
        return None
    return m.group(1).replace(",", "").replace("$", "").rstrip(".")


@torch.no_grad()
def eval_gsm8k(model, detok, prompt_ids, golds, batch=20, max_new=110):
    model.eval()
    correct, samples = 0, []
    for i in range(0, len(prompt_ids), batch):
        gens = greedy_batch(model, prompt_ids[i:i + batch], max_new, stop_text="Question:",
                            detok=detok)
        for j, g in enumerate(gens):
            text = detok.decode(g).split("Question:")[0]
            pred = strict_match(text)
            correct += pred == golds[i + j]
            samples.append(text)
    return correct / len(prompt_ids), samples


def make_eval_prompts(train, test, n, tokenizer_json, workdir):
    """5-shot prompts: shots sampled from train with seed 1234 (as lm-eval does), per question."""
    rng = random.Random(1234)
    qs = test[:n]
    texts = [fewshot_prompt(rng.sample(train, 5), q["question"]) for q in qs]
    ids = hf_tokenize(tokenizer_json, texts, workdir, "eval")
    golds = [q["answer"].rsplit("#### ", 1)[1].strip() for q in qs]
    return ids, golds


# ---------------------------------------------------------------- training
def pack_rows(docs, L, rng):
    """Shuffled documents packed into rows of L+1 tokens; every row starts at a document start."""
    order = list(range(len(docs)))
    rng.shuffle(order)
    rows, cur = [], []
    for d in order:
        cur.extend(docs[d])
        if len(cur) >= L + 1:
            rows.append(cur[:L + 1])
            cur = []
    return torch.tensor(rows)


def build_config(a, vocab):
    return types.SimpleNamespace(
        hidden=a.hidden, layers=a.layers, heads=a.heads, kv_heads=a.kv_heads, head_dim=a.head_dim,
        rotary_dim=a.rotary_dim, inter=a.inter, experts=a.experts, top_k=a.top_k, vocab=vocab,
        theta=a.rope_theta, eps=1e-6, max_pos=a.max_pos)


def lr_at(step, a):
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    frac = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def train(a, model, docs, log):
    rng = random.Random(a.seed)
    opt = torch.optim.AdamW(
        [{"params": [p for n, p in model.named_parameters() if p.dim() >= 2], "weight_decay": 0.1},
         {"params": [p for n, p in model.named_parameters() if p.dim() < 2], "weight_decay": 0.0}],
        lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    # Two phases: most steps on short rows (cheap attention), then full-length rows so the model
    # sees 5-shot-prompt positions (up to --seq-len) before the end.
    short_steps = int(a.steps * a.short_frac)
    phase = None
    t0, ema = time.time(), None
    n_tokens = 0
    moes = [layer.block_sparse_moe for layer in model.layers]
    for step in range(a.steps):
        if step and a.snapshot_every and step % a.snapshot_every == 0 and step > a.resume_step:
            torch.save(model.state_dict(), os.path.join(a.workdir, f"state_step{step}.pt"))
        if a.stop_at and step == a.stop_at:
            log(f"stopping after {step} steps of the {a.steps}-step schedule (--stop-at)")
            break
        want = ("short", a.short_len, a.short_batch) if step < short_steps else \
            ("full", a.seq_len, a.batch)
        if phase != want or cursor + B > len(rows):
            if phase != want:
                epoch = 0
                log(f"phase {want[0]}: rows of {want[1]} tokens, batch {want[2]}")
            else:
                epoch += 1
            phase, (_, L, B) = want, want
            rows, cursor = pack_rows(docs, L, rng), 0
            mask = causal_mask(L)
            positions = torch.arange(L)[None].expand(B, L)
        batch = rows[cursor:cursor + B]
        cursor += B
        if step < a.resume_step:  # replay the data order only; the weights come from the state
            continue
        n_tokens += B * L
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a)
        model.train()
        logits = model(batch[:, :-1], positions, mask)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():  # aux-loss-free balancing: raise under-loaded experts' bias
            for m in moes:
                load = m.last_load
                m.e_score_correction_bias += a.bias_rate * torch.sign(load.mean() - load)
        ema = loss.item() if ema is None else 0.98 * ema + 0.02 * loss.item()
        if step % 20 == 0 or step + 1 == a.steps or (a.bench and step == 4):
            el = time.time() - t0
            tps = n_tokens / max(el, 1e-9)
            loads = moes[0].last_load / moes[0].last_load.sum()
            log(f"step {step} epoch {epoch} loss {loss.item():.4f} ema {ema:.4f} "
                f"lr {lr_at(step, a):.2e} {tps:.0f} tok/s {el / 60:.1f} min "
                f"layer0 load max/min {float(loads.max()) / float(loads.min().clamp(min=1e-9)):.2f} "
                f"bias |max| {max(float(m.e_score_correction_bias.abs().max()) for m in moes):.3f}")
        if a.bench and step == 4:
            return ema
    return ema


# ---------------------------------------------------------------- checks
@torch.no_grad()
def check_against_reference(out_dir, model, prompts, log):
    ref = reference.Model(out_dir, "f32")
    worst = 0.0
    model.eval()
    for p in prompts:
        r = ref.forward(p, ref.new_cache())
        m = model(torch.tensor([p]), torch.arange(len(p))[None], causal_mask(len(p)))[0]
        diff = float((r - m).abs().max())
        worst = max(worst, diff)
        log(f"reference check: T={len(p)} max |logit diff| {diff:.2e} "
            f"(logit scale {float(r.abs().max()):.1f}); argmax agree "
            f"{float((r.argmax(-1) == m.argmax(-1)).float().mean()):.4f}")
    return worst, ref


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "synthetic-gsm8k"))
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "minimax-m2-tiny"))
    ap.add_argument("--workdir", default="/tmp/minimax-m2-tiny-work")
    ap.add_argument("--vocab", type=int, default=2000, help="BPE target (merges stop earlier "
                    "when no pair occurs twice)")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--rotary-dim", type=int, default=16)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--inter", type=int, default=96, help="per-expert intermediate size "
                    "(96: not a multiple of 8 x 32, but of 32, so MXFP4 can quantize it)")
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--max-pos", type=int, default=1024)
    ap.add_argument("--seq-len", type=int, default=640)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--short-len", type=int, default=256)
    ap.add_argument("--short-batch", type=int, default=6)
    ap.add_argument("--short-frac", type=float, default=0.7, help="share of steps on short rows")
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--bias-rate", type=float, default=2e-3)
    ap.add_argument("--chat-frac", type=float, default=0.15)
    ap.add_argument("--eval-n", type=int, default=150)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--stop-at", type=int, default=0,
                    help="stop after this many steps of the --steps schedule, then export")
    ap.add_argument("--state-in", help="skip training: export this saved state_dict, then check "
                    "and evaluate (used to export a snapshot of a run)")
    ap.add_argument("--snapshot-every", type=int, default=10,
                    help="save the state_dict to --workdir/state_stepN.pt every N steps")
    ap.add_argument("--resume-state", help="state_dict to continue from (the optimizer restarts)")
    ap.add_argument("--resume-step", type=int, default=0, help="step that --resume-state is at")
    ap.add_argument("--eval-only", action="store_true", help="skip training; evaluate --out")
    ap.add_argument("--bench", action="store_true", help="5 steps, print speed, exit")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    os.makedirs(a.workdir, exist_ok=True)
    logf = open(os.path.join(a.workdir, "train.log"), "a")

    def log(msg):
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, flush=True)
        logf.write(line + "\n")
        logf.flush()

    t_start = time.time()
    train_set = read_jsonl(os.path.join(a.data, "train.jsonl"))
    test_set = read_jsonl(os.path.join(a.data, "test.jsonl"))
    assert not {p["question"] for p in train_set} & {p["question"] for p in test_set}
    tok_json = os.path.join(a.out, "tokenizer.json")

    if a.state_in:
        a.eval_only = True
    if not a.eval_only:
        rng = random.Random(a.seed)
        texts = [render_plain(p) for p in train_set]
        texts += [render_chat(p, rng.choice(SYSTEM_PROMPTS)) for p in train_set
                  if rng.random() < a.chat_frac]
        corpus = os.path.join(a.workdir, "corpus.txt")
        with open(corpus, "w") as f:
            f.write("".join(texts))
        os.makedirs(a.out, exist_ok=True)
        subprocess.run(["node", os.path.join(ROOT, "tools", "tokenizer", "make_bpe_tokenizer.js"),
                        "--out", a.out, "--vocab", str(a.vocab), "--template", TEMPLATE, corpus],
                       check=True)
        cfg_path = os.path.join(a.out, "tokenizer_config.json")
        with open(cfg_path) as f:
            tcfg = json.load(f)
        tcfg["model_max_length"] = a.max_pos
        with open(cfg_path, "w") as f:
            json.dump(tcfg, f, indent=2)
            f.write("\n")
        docs = hf_tokenize(tok_json, texts, a.workdir, "train")
        n_tok = sum(len(d) for d in docs)
        log(f"{len(docs)} documents ({len(docs) - len(train_set)} chat), {n_tok} tokens, "
            f"longest {max(len(d) for d in docs)}")

    detok = Detok(tok_json)
    bos, eos = detok.special["]~!b["], detok.special["[e~["]
    c = build_config(a, detok.size)
    model = TinyMiniMax(c)
    log(f"config {vars(c)}; parameters {sum(p.numel() for p in model.parameters())}")

    if not a.eval_only:
        if a.resume_state:
            model.load_state_dict(torch.load(a.resume_state))
            log(f"resuming at step {a.resume_step} from {a.resume_state}")
        t0 = time.time()
        final = train(a, model, docs, log)
        log(f"training: {a.steps} steps in {(time.time() - t0) / 60:.1f} min, final loss (ema) "
            f"{final:.4f}")
        if a.bench:
            return
        export(model, c, a.out, a.out, bos, eos)
        log(f"exported {a.out}: " + ", ".join(
            f"{fn} {os.path.getsize(os.path.join(a.out, fn))} B" for fn in sorted(os.listdir(a.out))))

    if a.state_in:
        model.load_state_dict(torch.load(a.state_in))
        export(model, c, a.out, a.out, bos, eos)
        log(f"exported {a.state_in} to {a.out}")

    # Evaluate the exported (bf16) weights: reload them into the module (f32 arithmetic).
    model.load_hf(st_io.Checkpoint(a.out))
    model.eval()
    check_prompts = hf_tokenize(tok_json, [
        render_plain(test_set[0]), chat_prompt(test_set[1]["question"]),
        fewshot_prompt(train_set[:5], test_set[2]["question"])], a.workdir, "check")
    worst, ref = check_against_reference(a.out, model, check_prompts, log)
    if worst > 1e-3:
        log(f"FAIL: logits differ from tools/reference.py by {worst}")
        sys.exit(1)

    prompt_ids, golds = make_eval_prompts(train_set, test_set, a.eval_n, tok_json, a.workdir)
    log(f"eval prompts: {len(prompt_ids)}, longest {max(len(p) for p in prompt_ids)} tokens "
        f"(max_position_embeddings {c.max_pos})")
    t0 = time.time()
    acc, samples = eval_gsm8k(model, detok, prompt_ids, golds)
    log(f"5-shot strict-match (bf16 weights): {acc:.3f} on {len(golds)} test questions "
        f"({time.time() - t0:.0f} s)")
    log("sample: " + json.dumps(samples[0]))

    # The same greedy tokens from tools/reference.py (f32 numerics) on a few prompts.
    for p in prompt_ids[:2]:
        mine = greedy_batch(model, [p], 60)[0]
        _, theirs = ref.generate(p, len(mine))
        log(f"reference greedy agreement: {mine == theirs} ({len(mine)} tokens)")

    chat = hf_tokenize(tok_json, [chat_prompt(test_set[3]["question"])], a.workdir, "chat")[0]
    gen = greedy_batch(model, [chat], 150, stop_ids=(eos,))[0]
    log("chat: " + json.dumps(detok.decode(chat) + "|" + detok.decode(gen)))

    # Ablations: the model must depend on the routing bias and on the q_norm weights.
    moes = [layer.block_sparse_moe for layer in model.layers]
    saved = [m.e_score_correction_bias.clone() for m in moes]
    for m in moes:
        m.e_score_correction_bias.zero_()
    acc_nobias, _ = eval_gsm8k(model, detok, prompt_ids, golds)
    log(f"ablation: correction bias zeroed -> {acc_nobias:.3f}")
    for m, b in zip(moes, saved):
        m.e_score_correction_bias.copy_(b)
    saved_q = [layer.self_attn.q_norm.weight.data.clone() for layer in model.layers]
    for layer in model.layers:
        layer.self_attn.q_norm.weight.data.fill_(1.0)
    acc_noqn, _ = eval_gsm8k(model, detok, prompt_ids, golds)
    log(f"ablation: q_norm weights replaced by ones -> {acc_noqn:.3f}")
    for layer, w in zip(model.layers, saved_q):
        layer.self_attn.q_norm.weight.data.copy_(w)
    log(f"summary: accuracy {acc:.3f}, bias zeroed {acc_nobias:.3f}, q_norm ones {acc_noqn:.3f}; "
        f"total {(time.time() - t_start) / 60:.1f} min")


if __name__ == "__main__":
    main()
