// Dense linear layers: y = x · Wᵀ.
#pragma once

#include <cstddef>
#include <span>

#include "kernels/context.h"
#include "kernels/weights.h"

namespace moeserve::kernels {

// y[i, n] (= or +=) Σ_k x[i, k] · W[n, k]   for i < m, n < W.rows, k < W.cols.
//   x: f32 [m, ldx];  y: f32 [m, ldy].
// Numerics: for bf16 W, x is rounded to bf16 first (what a bf16 model's activations hold, and what
// vdpbf16ps consumes); products and sums are f32. For f32 W, everything is f32.
// m == 1 is the decode GEMV (bandwidth bound: each W byte is read once, threads split the rows);
// larger m is the prefill GEMM (compute bound: packed, cache-blocked microkernel).
void MatMul(const float* x, size_t ldx, size_t m, const WeightMatrix& w, float* y, size_t ldy,
            KernelContext& ctx, bool accumulate = false);

// One x times several weights (the attention block's q, k and v projections): y_i = x · W_iᵀ,
// each exactly as MatMul would give it. x is prepared once (rounded / packed / quantized) and the
// weights' rows are split over the pool as one matrix, so the small ones do not each pay a pass
// over x and a pool barrier. Weights of different formats or widths go one MatMul each.
struct MatMulOutput {
  const WeightMatrix* w;
  float* y;
  size_t ldy;
};
void MatMulSharedX(const float* x, size_t ldx, size_t m, std::span<const MatMulOutput> outs,
                   KernelContext& ctx);

// Scalar reference with exactly the numerics above; used by tests.
void MatMulReference(const float* x, size_t ldx, size_t m, const WeightMatrix& w, float* y,
                     size_t ldy, bool accumulate = false);

}  // namespace moeserve::kernels
