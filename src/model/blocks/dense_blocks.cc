#include "model/blocks/dense_blocks.h"

#include "core/check.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"

namespace moeserve::model {

RmsNormBlock::RmsNormBlock(WeightReader& weights, const std::string& name, size_t width, float eps)
    : weight_(weights.Vector(name, width)), eps_(eps) {}

void RmsNormBlock::Forward(const float* x, size_t rows, float* y, const RunContext& ctx) const {
  const size_t w = weight_.size();
  ctx.ForRows(rows, [&](size_t r0, size_t r1) {
    kernels::RmsNorm(x + r0 * w, w, weight_.data(), y + r0 * w, w, r1 - r0, w, eps_);
  });
}

EmbeddingBlock::EmbeddingBlock(WeightReader& weights, const std::string& name, size_t vocab,
                               size_t hidden)
    : table_(weights.DenseTable(name, vocab, hidden)) {}

void EmbeddingBlock::Forward(const std::vector<int32_t>& ids, float* out) const {
  const size_t h = table_.cols;
  const bf16* base = static_cast<const bf16*>(table_.data);
  for (size_t t = 0; t < ids.size(); ++t) {
    if (ids[t] < 0 || static_cast<size_t>(ids[t]) >= table_.rows)
      Fail("token id ", ids[t], " is outside the vocabulary [0, ", table_.rows, ")");
    const bf16* row = base + static_cast<size_t>(ids[t]) * table_.row_stride;
    for (size_t j = 0; j < h; ++j) out[t * h + j] = Bf16ToF32(row[j]);
  }
}

LmHeadBlock::LmHeadBlock(WeightReader& weights, const ModelConfig& c,
                         const EmbeddingBlock& embedding)
    : config_(c),
      final_norm_(weights, "model.norm.weight", c.hidden_size, c.rms_norm_eps),
      weight_(c.tie_word_embeddings
                  ? embedding.table()
                  : weights.Linear("lm_head.weight", c.vocab_size, c.hidden_size)) {}

void LmHeadBlock::Forward(const float* h, const std::vector<int32_t>& rows, float* logits,
                          const RunContext& ctx) {
  const size_t hidden = config_.hidden_size;
  const PhaseTimer timer(
      ctx.profile, Phase::kLmHead, [&] { return BytesOf(weight_); },
      [&] { return MatMulFlops(rows.size(), weight_); });
  gathered_.resize(rows.size() * hidden);
  for (size_t i = 0; i < rows.size(); ++i)
    std::copy_n(h + static_cast<size_t>(rows[i]) * hidden, hidden, gathered_.data() + i * hidden);
  final_norm_.Forward(gathered_.data(), rows.size(), gathered_.data(), ctx);
  kernels::MatMul(gathered_.data(), hidden, rows.size(), weight_, logits, config_.vocab_size,
                  *ctx.kernels);
}

}  // namespace moeserve::model
