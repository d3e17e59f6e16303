// The decoder stack every supported architecture shares: embedding, N x (RMSNorm -> attention ->
// residual -> RMSNorm -> sparse MoE -> residual), final RMSNorm and LM head. An architecture file
// supplies its ModelConfig and its checkpoint names; nothing here knows which architecture it is.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/blocks/attention_block.h"
#include "model/blocks/dense_blocks.h"
#include "model/blocks/moe_block.h"
#include "model/model.h"

namespace moeserve::model {

struct LayerNames {
  std::string attention = "self_attn.";  // relative to "model.layers.N."
  std::string input_norm = "input_layernorm.weight";
  std::string post_attention_norm = "post_attention_layernorm.weight";
  MoeNames moe;
};

class MoeTransformer final : public Model {
 public:
  MoeTransformer(const ModelConfig& config, const LayerNames& names, WeightReader& weights,
                 Parallelism parallel, RunContext ctx);

  const ModelConfig& config() const override { return config_; }
  KvLayout kv_layout() const override;
  size_t DecodeBytesPerToken() const override;
  size_t WeightBytes() const override { return weight_bytes_; }
  void Forward(const Batch& batch, KvStorage& kv, float* logits) override;

 private:
  struct Layer {
    RmsNormBlock input_norm;
    AttentionBlock attention;
    RmsNormBlock post_attention_norm;
    MoeBlock moe;
  };

  // The last layer's MoE half (norm, experts, residual) runs only on the rows whose logits are
  // wanted: nothing else reads its output, and the keys and values of every row were written by
  // its attention. A prefill of one prompt then runs that MoE on 1 row instead of all (as
  // llama.cpp's and ik_llama.cpp's graphs do with inp_out_ids), and a prefill chunk that wants no
  // logits skips it. Moves those rows of hidden_ to its first rows, in order; their indices
  // (0, 1, ...) go to kept_rows_ for the LM head. Returns how many.
  size_t KeepLogitsRows(const std::vector<int32_t>& rows);
  // hidden_ rows [0, rows) += branch's (the residual), rows split over the pool's threads.
  void AddRows(const float* branch, size_t rows);

  ModelConfig config_;
  RunContext ctx_;
  std::unique_ptr<EmbeddingBlock> embedding_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::unique_ptr<LmHeadBlock> lm_head_;
  size_t weight_bytes_ = 0;
  std::vector<float> hidden_, normed_, branch_;  // [T, hidden] scratch
  StepScratch scratch_;                          // shared by every layer
  std::vector<int32_t> positions_;
  std::vector<int32_t> kept_rows_;
};

}  // namespace moeserve::model
