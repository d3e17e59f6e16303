#include "model/blocks/attention_block.h"

#include <cmath>
#include <optional>

#include "core/check.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "kernels/quant.h"
#include "kernels/rope.h"

namespace moeserve::model {

AttentionBlock::AttentionBlock(WeightReader& weights, const std::string& prefix,
                               const ModelConfig& c, Shard shard)
    : config_(c), shard_(shard) {
  const size_t tp = static_cast<size_t>(shard.size), rank = static_cast<size_t>(shard.rank);
  const size_t d = c.head_dim;
  if (c.num_heads % tp != 0)
    Fail("tensor parallel size ", tp, " does not divide num_attention_heads ", c.num_heads);
  local_heads_ = c.num_heads / tp;
  size_t kv_head_begin;
  if (tp <= c.num_kv_heads) {
    if (c.num_kv_heads % tp != 0)
      Fail("tensor parallel size ", tp, " does not divide num_key_value_heads ", c.num_kv_heads);
    local_kv_heads_ = c.num_kv_heads / tp;
    kv_head_begin = rank * local_kv_heads_;
  } else {
    if (tp % c.num_kv_heads != 0)
      Fail("tensor parallel size ", tp, " is not a multiple of num_key_value_heads ",
           c.num_kv_heads);
    const size_t replicas = tp / c.num_kv_heads;
    local_kv_heads_ = 1;
    kv_head_begin = rank / replicas;
    counts_k_norm_ = rank % replicas == 0;
  }
  const size_t q0 = rank * local_heads_ * d, q1 = q0 + local_heads_ * d;
  const size_t k0 = kv_head_begin * d, k1 = k0 + local_kv_heads_ * d;
  const size_t h = c.hidden_size;
  wq_ = weights.Linear(prefix + "q_proj.weight", c.q_width(), h, {q0, q1, 0, h});
  wk_ = weights.Linear(prefix + "k_proj.weight", c.kv_width(), h, {k0, k1, 0, h});
  wv_ = weights.Linear(prefix + "v_proj.weight", c.kv_width(), h, {k0, k1, 0, h});
  wo_ = weights.Linear(prefix + "o_proj.weight", h, c.q_width(), {0, h, q0, q1});
  switch (c.qk_norm) {
    case QkNorm::kNone:
      break;
    case QkNorm::kFullWidth:
      // The checkpoint holds the full width whatever the TP size; a per-rank-sized tensor is
      // refused by the loader's shape check (the bug that cost ATOM two thirds of GSM8K).
      q_norm_ = weights.Vector(prefix + "q_norm.weight", c.q_width(), q0, q1);
      k_norm_ = weights.Vector(prefix + "k_norm.weight", c.kv_width(), k0, k1);
      break;
    case QkNorm::kPerHead:
      q_norm_ = weights.Vector(prefix + "q_norm.weight", d);
      k_norm_ = weights.Vector(prefix + "k_norm.weight", d);
      break;
  }
}

size_t AttentionBlock::DecodeBytes() const {
  return BytesOf(wq_) + BytesOf(wk_) + BytesOf(wv_) + BytesOf(wo_);
}

void AttentionBlock::NormalizeQk(float* q, float* k, size_t t, const RunContext& ctx) {
  const size_t d = config_.head_dim, qw = local_heads_ * d, kw = local_kv_heads_ * d;
  const float eps = config_.rms_norm_eps;
  if (config_.qk_norm == QkNorm::kPerHead) {
    ctx.ForRows(t, [&](size_t r0, size_t r1) {
      kernels::RmsNormPerHead(q + r0 * qw, qw, q_norm_.data(), q + r0 * qw, qw, r1 - r0,
                              local_heads_, d, eps);
      kernels::RmsNormPerHead(k + r0 * kw, kw, k_norm_.data(), k + r0 * kw, kw, r1 - r0,
                              local_kv_heads_, d, eps);
    });
    return;
  }
  // Full width: one variance per token over all heads of all ranks. Sums of squares of q and k
  // travel in a single all-reduce: [T] for q then [T] for k.
  std::vector<float> sums(2 * t);
  ctx.ForRows(t, [&](size_t r0, size_t r1) {
    kernels::SumOfSquares(q + r0 * qw, qw, r1 - r0, qw, sums.data() + r0);
    kernels::SumOfSquares(k + r0 * kw, kw, r1 - r0, kw, sums.data() + t + r0);
  });
  if (!counts_k_norm_) std::fill(sums.begin() + t, sums.end(), 0.0f);
  ctx.comm->AllReduceSum(sums.data(), sums.size());
  ctx.ForRows(t, [&](size_t r0, size_t r1) {
    kernels::RmsNormWithSumSq(q + r0 * qw, qw, q_norm_.data(), q + r0 * qw, qw, r1 - r0, qw,
                              sums.data() + r0, config_.q_width(), eps);
    kernels::RmsNormWithSumSq(k + r0 * kw, kw, k_norm_.data(), k + r0 * kw, kw, r1 - r0, kw,
                              sums.data() + t + r0, config_.kv_width(), eps);
  });
}

void AttentionBlock::WriteKv(const float* k, const float* v, const Batch& batch, size_t layer,
                             KvStorage& kv) {
  const size_t kw = local_kv_heads_ * config_.head_dim, bs = kv.block_size();
  size_t row = 0;
  for (const SequenceSlice& s : batch.seqs) {
    for (size_t i = 0; i < s.num_new_tokens; ++i, ++row) {
      const size_t pos = s.context_len + i;
      MOESERVE_CHECK(pos / bs < s.block_table.size(), "block table too short: pos ", pos);
      const int32_t block = s.block_table[pos / bs];
      if (kv.dtype() == DType::kF8E4M3) {
        kernels::WriteKvRowFp8(k + row * kw, local_kv_heads_, config_.head_dim, bs, pos % bs,
                               kv.KeyBlock(layer, block));
        kernels::WriteKvRowFp8(v + row * kw, local_kv_heads_, config_.head_dim, bs, pos % bs,
                               kv.ValueBlock(layer, block));
        continue;
      }
      bf16* kd = reinterpret_cast<bf16*>(kv.KeyBlock(layer, block)) + (pos % bs) * kw;
      bf16* vd = reinterpret_cast<bf16*>(kv.ValueBlock(layer, block)) + (pos % bs) * kw;
      for (size_t j = 0; j < kw; ++j) {
        kd[j] = F32ToBf16(k[row * kw + j]);
        vd[j] = F32ToBf16(v[row * kw + j]);
      }
    }
  }
}

void AttentionBlock::Forward(const float* x, const Batch& batch,
                             const std::vector<int32_t>& positions, size_t layer, KvStorage& kv,
                             float* out, StepScratch& scratch, const RunContext& ctx) {
  const size_t t = batch.num_tokens(), d = config_.head_dim, h = config_.hidden_size;
  const size_t qw = local_heads_ * d, kw = local_kv_heads_ * d;
  std::vector<float>&q = scratch.q, &k = scratch.k, &v = scratch.v, &attn = scratch.attn;
  q.resize(t * qw);
  k.resize(t * kw);
  v.resize(t * kw);
  attn.resize(t * qw);
  kernels::KernelContext& kc = *ctx.kernels;
  const kernels::MatMulOutput qkv[] = {
      {&wq_, q.data(), qw}, {&wk_, k.data(), kw}, {&wv_, v.data(), kw}};
  {
    const PhaseTimer timer(
        ctx.profile, Phase::kQkvProjection,
        [&] { return BytesOf(wq_) + BytesOf(wk_) + BytesOf(wv_); },
        [&] { return MatMulFlops(t, wq_) + MatMulFlops(t, wk_) + MatMulFlops(t, wv_); });
    kernels::MatMulSharedX(x, h, t, qkv, kc);
  }
  std::optional<PhaseTimer> norm_rope(std::in_place, ctx.profile, Phase::kQkNormRope);
  if (config_.qk_norm != QkNorm::kNone) NormalizeQk(q.data(), k.data(), t, ctx);
  ctx.ForRows(t, [&](size_t r0, size_t r1) {
    kernels::RopeNeox(q.data() + r0 * qw, qw, r1 - r0, local_heads_, d, config_.rotary_dim,
                      positions.data() + r0, config_.rope_theta);
    kernels::RopeNeox(k.data() + r0 * kw, kw, r1 - r0, local_kv_heads_, d, config_.rotary_dim,
                      positions.data() + r0, config_.rope_theta);
  });
  WriteKv(k.data(), v.data(), batch, layer, kv);

  // Per-sequence views of the cache blocks for this layer.
  std::vector<std::vector<const uint8_t*>> k_blocks(batch.seqs.size()), v_blocks(batch.seqs.size());
  std::vector<kernels::AttentionSeq> seqs(batch.seqs.size());
  const bool fp8 = kv.dtype() == DType::kF8E4M3;
  size_t row = 0;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const SequenceSlice& s = batch.seqs[i];
    const size_t kv_len = s.context_len + s.num_new_tokens;
    const size_t num_blocks = (kv_len + kv.block_size() - 1) / kv.block_size();
    for (size_t b = 0; b < num_blocks; ++b) {
      k_blocks[i].push_back(kv.KeyBlock(layer, s.block_table[b]));
      v_blocks[i].push_back(kv.ValueBlock(layer, s.block_table[b]));
    }
    kernels::AttentionSeq& seq = seqs[i];
    seq = {row, s.num_new_tokens, kv_len};
    if (fp8) {
      seq.k_blocks8 = k_blocks[i].data();
      seq.v_blocks8 = v_blocks[i].data();
    } else {  // bf16 blocks: the same block pointers, typed
      seq.k_blocks = reinterpret_cast<const bf16* const*>(k_blocks[i].data());
      seq.v_blocks = reinterpret_cast<const bf16* const*>(v_blocks[i].data());
    }
    row += s.num_new_tokens;
  }
  const kernels::AttentionShape shape{local_heads_, local_kv_heads_, d, kv.block_size(),
                                      1.0f / std::sqrt(static_cast<float>(d))};
  norm_rope.reset();
  {
    // q·k and p·v per q head and key a query sees: 2 · 2 · head_dim operations.
    const auto flops = [&] {
      double pairs = 0;
      for (const kernels::AttentionSeq& sq : seqs) {
        const double n = static_cast<double>(sq.q_len), before = static_cast<double>(sq.kv_len) - n;
        pairs += n * before + n * (n + 1) / 2;
      }
      return 4.0 * static_cast<double>(d * local_heads_) * pairs;
    };
    const PhaseTimer timer(ctx.profile, Phase::kAttention, 0, flops);
    kernels::Attention(q.data(), qw, seqs, shape, attn.data(), qw, kc);
  }
  {
    const PhaseTimer timer(
        ctx.profile, Phase::kOutProjection, [&] { return BytesOf(wo_); },
        [&] { return MatMulFlops(t, wo_); });
    kernels::MatMul(attn.data(), qw, t, wo_, out, h, kc);
  }
  ctx.comm->AllReduceSum(out, t * h);
}

}  // namespace moeserve::model
