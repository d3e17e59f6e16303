// Mixture-of-experts: routing and the grouped expert computation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/context.h"
#include "kernels/weights.h"

namespace moeserve::kernels {

// MiniMax-M2 / DeepSeek-V3 routing, all f32: s = sigmoid(logits); the top-k of s + bias choose the
// experts (ties → lower expert index); weights are the UNbiased s of the chosen experts, divided by
// their sum when `renormalize`, then times `routed_scale`.
//   logits [T, E], bias [E] (may be null = zeros), idx [T, k], weights [T, k]; idx sorted by
//   descending biased score.
void RouteSigmoidTopK(const float* logits, const float* bias, size_t num_tokens, size_t num_experts,
                      size_t k, bool renormalize, float routed_scale, int32_t* idx, float* weights);

// Qwen3-MoE / Mixtral routing: p = softmax(logits) in f32; the top-k of p (ties → lower index);
// weights = p[idx], divided by their sum when `norm_topk_prob`.
void RouteSoftmaxTopK(const float* logits, size_t num_tokens, size_t num_experts, size_t k,
                      bool norm_topk_prob, int32_t* idx, float* weights);

// One expert's SwiGLU MLP: down(silu(gate(x)) ⊙ up(x)).  w1 = gate [I, H], w3 = up [I, H],
// w2 = down [H, I]. An expert whose w1 is empty is not on this rank (expert parallelism): skipped.
struct ExpertWeights {
  WeightMatrix w1, w3, w2;
};

// y[t] (= or +=) Σ_j weights[t, j] · expert_{idx[t, j]}(x[t]).
// Tokens are gathered per expert so each expert's weights are read once per call, whatever the
// number of tokens routed to it; experts are distributed over the pool's threads.
//   x f32 [T, ldx] (H = experts[*].w1.cols), y f32 [T, ldy]. Numerics as MatMul: inputs of each
//   projection rounded to bf16 for bf16 weights; silu and the product in f32.
void MoeExperts(const float* x, size_t ldx, size_t num_tokens, const int32_t* idx,
                const float* weights, size_t k, std::span<const ExpertWeights> experts, float* y,
                size_t ldy, KernelContext& ctx, bool accumulate = false);

void MoeExpertsReference(const float* x, size_t ldx, size_t num_tokens, const int32_t* idx,
                         const float* weights, size_t k, std::span<const ExpertWeights> experts,
                         float* y, size_t ldy, bool accumulate = false);

}  // namespace moeserve::kernels
