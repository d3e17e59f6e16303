#include "model/moe_transformer.h"

#include <algorithm>

#include "core/check.h"

namespace moeserve::model {

MoeTransformer::MoeTransformer(const ModelConfig& config, const LayerNames& names,
                               WeightReader& weights, Parallelism parallel, RunContext ctx)
    : config_(config), ctx_(ctx) {
  const ModelConfig& c = config_;
  embedding_ = std::make_unique<EmbeddingBlock>(weights, "model.embed_tokens.weight", c.vocab_size,
                                                c.hidden_size);
  for (size_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    layers_.push_back(std::unique_ptr<Layer>(new Layer{
        RmsNormBlock(weights, p + names.input_norm, c.hidden_size, c.rms_norm_eps),
        AttentionBlock(weights, p + names.attention, c, parallel.shard),
        RmsNormBlock(weights, p + names.post_attention_norm, c.hidden_size, c.rms_norm_eps),
        MoeBlock(weights, p, names.moe, c, parallel)}));
  }
  lm_head_ = std::make_unique<LmHeadBlock>(weights, c, *embedding_);
  weight_bytes_ = weights.bytes_mapped();
}

KvLayout MoeTransformer::kv_layout() const {
  return {config_.num_layers, layers_.empty() ? 0 : layers_[0]->attention.local_kv_heads(),
          config_.head_dim};
}

size_t MoeTransformer::DecodeBytesPerToken() const {
  size_t bytes = lm_head_->DecodeBytes();
  for (auto& l : layers_) bytes += l->attention.DecodeBytes() + l->moe.DecodeBytes();
  return bytes;
}

void MoeTransformer::Forward(const Batch& batch, KvStorage& kv, float* logits) {
  const size_t t = batch.num_tokens(), h = config_.hidden_size;
  size_t rows = 0;
  positions_.clear();
  for (const SequenceSlice& s : batch.seqs) {
    for (size_t i = 0; i < s.num_new_tokens; ++i)
      positions_.push_back(static_cast<int32_t>(s.context_len + i));
    rows += s.num_new_tokens;
  }
  MOESERVE_CHECK(rows == t, "sequences cover ", rows, " rows of a ", t, "-token batch");
  for (size_t k = 0; k < batch.logits_rows.size(); ++k) {
    const int32_t r = batch.logits_rows[k];
    MOESERVE_CHECK(r >= 0 && static_cast<size_t>(r) < t, "logits row ", r, " of a ", t,
                   "-token batch");
    MOESERVE_CHECK(k == 0 || r > batch.logits_rows[k - 1],
                   "logits rows not ascending: ", batch.logits_rows[k - 1], " then ", r);
  }

  hidden_.resize(t * h);
  normed_.resize(t * h);
  branch_.resize(t * h);
  embedding_->Forward(batch.token_ids, hidden_.data());
  const std::vector<int32_t>* head_rows = &batch.logits_rows;
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& layer = *layers_[i];
    layer.input_norm.Forward(hidden_.data(), t, normed_.data(), ctx_);
    layer.attention.Forward(normed_.data(), batch, positions_, i, kv, branch_.data(), scratch_,
                            ctx_);
    AddRows(branch_.data(), t);
    size_t n = t;  // rows that go on through the MoE half: in the last layer, only those whose
                   // logits are wanted (KeepLogitsRows says why)
    if (i + 1 == layers_.size() && batch.logits_rows.size() < t) {
      n = KeepLogitsRows(batch.logits_rows);
      head_rows = &kept_rows_;
    }
    if (n == 0) continue;  // a prefill chunk that wants no logits
    layer.post_attention_norm.Forward(hidden_.data(), n, normed_.data(), ctx_);
    layer.moe.Forward(normed_.data(), n, branch_.data(), scratch_, ctx_);
    AddRows(branch_.data(), n);
  }
  if (logits && !head_rows->empty()) lm_head_->Forward(hidden_.data(), *head_rows, logits, ctx_);
}

void MoeTransformer::AddRows(const float* branch, size_t rows) {
  const size_t h = config_.hidden_size;
  float* hidden = hidden_.data();
  ctx_.ForRows(rows, [&](size_t r0, size_t r1) {
    for (size_t j = r0 * h; j < r1 * h; ++j) hidden[j] += branch[j];
  });
}

size_t MoeTransformer::KeepLogitsRows(const std::vector<int32_t>& rows) {
  // Row k takes row rows[k] (ascending, so rows[k] >= k: a forward copy reads no row it wrote).
  const size_t h = config_.hidden_size;
  kept_rows_.resize(rows.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    if (static_cast<size_t>(rows[k]) != k)
      std::copy_n(hidden_.data() + rows[k] * h, h, hidden_.data() + k * h);
    kept_rows_[k] = static_cast<int32_t>(k);
  }
  return rows.size();
}

}  // namespace moeserve::model
