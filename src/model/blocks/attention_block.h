// Self-attention shared by the architectures: q/k/v projections, optional QK-norm (full width as
// MiniMax-M2, or per head as Qwen3), partial NeoX RoPE, K/V written to the paged cache, causal GQA
// over the cache, o_proj, and the all-reduce of the row-parallel output under tensor parallelism.
//
// Sharding (MINIMAX-M2.md): q heads split contiguously over ranks; kv heads split likewise when
// tp <= num_kv_heads, else each rank holds one kv head, replicated (rank r holds head
// r / (tp / num_kv_heads)); o_proj split on its input dim like q; q_norm/k_norm weights are always
// full width in the checkpoint and each rank takes the slice matching its heads.
#pragma once

#include <string>
#include <vector>

#include "kernels/weights.h"
#include "model/batch.h"
#include "model/blocks/step_scratch.h"
#include "model/model.h"
#include "model/weights.h"

namespace moeserve::model {

class AttentionBlock {
 public:
  // `prefix` is e.g. "model.layers.3.self_attn.".
  AttentionBlock(WeightReader& weights, const std::string& prefix, const ModelConfig& config,
                 Shard shard);

  size_t local_heads() const { return local_heads_; }
  size_t local_kv_heads() const { return local_kv_heads_; }
  size_t DecodeBytes() const;

  // x: normed hidden [T, hidden] -> out [T, hidden] (complete, all-reduced). Uses scratch.q, k,
  // v and attn.
  void Forward(const float* x, const Batch& batch, const std::vector<int32_t>& positions,
               size_t layer, KvStorage& kv, float* out, StepScratch& scratch,
               const RunContext& ctx);

 private:
  void NormalizeQk(float* q, float* k, size_t num_tokens, const RunContext& ctx);
  void WriteKv(const float* k, const float* v, const Batch& batch, size_t layer, KvStorage& kv);

  const ModelConfig& config_;
  Shard shard_;
  size_t local_heads_ = 0, local_kv_heads_ = 0;
  // Replicated kv heads: only the first holder of each head adds its k sum of squares, so the
  // all-reduced total counts each head once.
  bool counts_k_norm_ = true;
  kernels::WeightMatrix wq_, wk_, wv_, wo_;
  std::vector<float> q_norm_, k_norm_;  // this rank's slice (full width) or one head (per head)
};

}  // namespace moeserve::model
