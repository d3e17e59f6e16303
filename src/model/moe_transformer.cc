#include "model/moe_transformer.h"

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
  for (int32_t r : batch.logits_rows) MOESERVE_CHECK(r >= 0 && static_cast<size_t>(r) < t, r);

  hidden_.resize(t * h);
  normed_.resize(t * h);
  branch_.resize(t * h);
  embedding_->Forward(batch.token_ids, hidden_.data());
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& layer = *layers_[i];
    layer.input_norm.Forward(hidden_.data(), t, normed_.data());
    layer.attention.Forward(normed_.data(), batch, positions_, i, kv, branch_.data(), scratch_,
                            ctx_);
    for (size_t j = 0; j < t * h; ++j) hidden_[j] += branch_[j];
    layer.post_attention_norm.Forward(hidden_.data(), t, normed_.data());
    layer.moe.Forward(normed_.data(), t, branch_.data(), scratch_, ctx_);
    for (size_t j = 0; j < t * h; ++j) hidden_[j] += branch_[j];
  }
  if (!batch.logits_rows.empty())
    lm_head_->Forward(hidden_.data(), batch.logits_rows, logits, ctx_);
}

}  // namespace moeserve::model
