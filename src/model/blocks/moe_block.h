// The sparse MoE MLP shared by the architectures: an f32 router (sigmoid + correction bias as
// MiniMax-M2, or softmax as Qwen3-MoE), top-k, the grouped SwiGLU experts, and the all-reduce of
// the row-parallel down projections under tensor parallelism.
//
// Sharding: experts split on the intermediate dim (w1/w3 rows, w2 columns), uneven splits allowed;
// or, with expert parallelism, whole experts per rank (rank r owns experts SplitRange(E, r), also
// when E does not divide by the rank count): every rank routes every token, computes the
// experts it owns, and the all-reduce sums the partial outputs (dispatch and combine in one).
// The router and its bias are replicated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/moe.h"
#include "model/batch.h"
#include "model/blocks/step_scratch.h"
#include "model/model.h"
#include "model/weights.h"

namespace moeserve::model {

// Checkpoint names, which differ between architectures.
struct MoeNames {
  std::string gate;           // e.g. "block_sparse_moe.gate.weight"
  std::string bias;           // "" when the architecture has none
  std::string expert_prefix;  // "block_sparse_moe.experts."
  std::string w1, w3, w2;     // "w1.weight" / "gate_proj.weight", ...
};

class MoeBlock {
 public:
  // `prefix` is e.g. "model.layers.3."; names are appended to it.
  MoeBlock(WeightReader& weights, const std::string& prefix, const MoeNames& names,
           const ModelConfig& config, Parallelism parallel);

  size_t DecodeBytes() const;  // top-k experts' bytes for one token + the router
  // Bytes of the distinct local experts that topk_idx routes to (what a step reads of them).
  size_t TouchedExpertBytes(const std::vector<int32_t>& topk_idx) const;
  // Operations of the (token, local expert) pairs topk_idx routes (2 per multiply-add).
  double RoutedExpertFlops(const std::vector<int32_t>& topk_idx) const;

  // x: normed hidden [T, hidden] -> out [T, hidden] (complete, all-reduced). Uses
  // scratch.router_logits, topk_idx and topk_weights.
  void Forward(const float* x, size_t num_tokens, float* out, StepScratch& scratch,
               const RunContext& ctx);

 private:
  const ModelConfig& config_;
  std::vector<float> gate_;  // [E, hidden] f32: routing decisions must not see bf16 rounding
  std::vector<float> bias_;  // [E] or empty
  std::vector<kernels::ExpertWeights> experts_;  // empty entries: experts of other ranks
  size_t local_experts_ = 0;
};

}  // namespace moeserve::model
