#include "model/blocks/moe_block.h"

#include <algorithm>
#include <optional>

#include "core/check.h"
#include "kernels/matmul.h"

namespace moeserve::model {

MoeBlock::MoeBlock(WeightReader& weights, const std::string& prefix, const MoeNames& names,
                   const ModelConfig& c, Parallelism parallel)
    : config_(c) {
  const size_t h = c.hidden_size, inter = c.expert_intermediate_size, e = c.num_experts;
  gate_ = weights.MatrixF32(prefix + names.gate, e, h);
  if (!names.bias.empty()) bias_ = weights.Vector(prefix + names.bias, e);
  // Tensor parallel: this rank's slice of every expert. Expert parallel: all of its own experts.
  // MXFP4 experts split their intermediate dim on 32-column groups (w2's input dim).
  const size_t align = weights.ColumnAlignment(prefix + names.expert_prefix + "0." + names.w2);
  const auto [i0, i1] = parallel.expert_parallel ? std::pair<size_t, size_t>{0, inter}
                                                 : SplitRangeAligned(inter, parallel.shard, align);
  const auto [e0, e1] =
      parallel.expert_parallel ? SplitRange(e, parallel.shard) : std::pair<size_t, size_t>{0, e};
  experts_.resize(e);
  for (size_t j = 0; j < e; ++j) {
    const std::string p = prefix + names.expert_prefix + std::to_string(j) + ".";
    if (j < e0 || j >= e1) {  // another rank's expert: checked, never mapped
      weights.CheckLinear(p + names.w1, inter, h);
      weights.CheckLinear(p + names.w3, inter, h);
      weights.CheckLinear(p + names.w2, h, inter);
      continue;
    }
    experts_[j].w1 = weights.Linear(p + names.w1, inter, h, {i0, i1, 0, h});
    experts_[j].w3 = weights.Linear(p + names.w3, inter, h, {i0, i1, 0, h});
    experts_[j].w2 = weights.Linear(p + names.w2, h, inter, {0, h, i0, i1});
    local_experts_++;
  }
}

size_t MoeBlock::DecodeBytes() const {
  const auto& w = *std::find_if(experts_.begin(), experts_.end(),
                                [](const kernels::ExpertWeights& x) { return !x.w1.empty(); });
  const size_t per_expert = BytesOf(w.w1) + BytesOf(w.w3) + BytesOf(w.w2);
  return per_expert * config_.num_experts_per_token + gate_.size() * sizeof(float);
}

double MoeBlock::RoutedExpertFlops(const std::vector<int32_t>& topk_idx) const {
  double flops = 0;
  for (int32_t i : topk_idx) {
    const kernels::ExpertWeights& w = experts_[i];
    if (!w.w1.empty()) flops += MatMulFlops(1, w.w1) + MatMulFlops(1, w.w3) + MatMulFlops(1, w.w2);
  }
  return flops;
}

size_t MoeBlock::TouchedExpertBytes(const std::vector<int32_t>& topk_idx) const {
  std::vector<bool> seen(experts_.size(), false);
  size_t bytes = 0;
  for (int32_t i : topk_idx) {
    const kernels::ExpertWeights& w = experts_[i];
    if (seen[i] || w.w1.empty()) continue;
    seen[i] = true;
    bytes += BytesOf(w.w1) + BytesOf(w.w3) + BytesOf(w.w2);
  }
  return bytes;
}

void MoeBlock::Forward(const float* x, size_t t, float* out, StepScratch& scratch,
                       const RunContext& ctx) {
  const size_t h = config_.hidden_size, e = config_.num_experts, k = config_.num_experts_per_token;
  std::vector<float>&logits = scratch.router_logits, &topk_weights = scratch.topk_weights;
  std::vector<int32_t>& topk_idx = scratch.topk_idx;
  logits.resize(t * e);
  topk_idx.resize(t * k);
  topk_weights.resize(t * k);
  std::optional<PhaseTimer> router(std::in_place, ctx.profile, Phase::kRouter,
                                   gate_.size() * sizeof(float), 2.0 * t * gate_.size());
  kernels::MatMul(x, h, t, kernels::F32Matrix(gate_.data(), e, h), logits.data(), e, *ctx.kernels);
  switch (config_.routing) {
    case Routing::kSigmoidWithBias:
      kernels::RouteSigmoidTopK(logits.data(), bias_.empty() ? nullptr : bias_.data(), t, e, k,
                                config_.renormalize_topk, config_.routed_scaling_factor,
                                topk_idx.data(), topk_weights.data());
      break;
    case Routing::kSoftmax:
      kernels::RouteSoftmaxTopK(logits.data(), t, e, k, config_.renormalize_topk, topk_idx.data(),
                                topk_weights.data());
      break;
  }
  router.reset();
  // Accumulate into zeros: under expert parallelism a token may route to no local expert.
  std::fill(out, out + t * h, 0.0f);
  {
    const PhaseTimer timer(
        ctx.profile, Phase::kExperts, [&] { return TouchedExpertBytes(topk_idx); },
        [&] { return RoutedExpertFlops(topk_idx); });
    kernels::MoeExperts(x, h, t, topk_idx.data(), topk_weights.data(), k, experts_, out, h,
                        *ctx.kernels, /*accumulate=*/true);
  }
  ctx.comm->AllReduceSum(out, t * h);
}

}  // namespace moeserve::model
