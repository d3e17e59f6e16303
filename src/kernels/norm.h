// RMSNorm as MiniMax-M2 and Qwen3 use it: y = w ⊙ x / sqrt(mean(x²) + eps)  (w, not 1 + w), in f32.
#pragma once

#include <cstddef>

namespace moeserve::kernels {

// rows of `width` elements; x [rows, ldx], y [rows, ldy] (y may alias x), w [width] f32.
void RmsNorm(const float* x, size_t ldx, const float* w, float* y, size_t ldy, size_t rows,
             size_t width, float eps);

// The two halves of RmsNorm, for tensor parallelism where one row is split over ranks:
// SumOfSquares gives each row's local Σx² (f32 accumulation in double-free pairwise lanes);
// the caller all-reduces them; RmsNormWithSumSq then scales by 1/sqrt(sum_sq[r] / full_width +
// eps).
void SumOfSquares(const float* x, size_t ldx, size_t rows, size_t width, float* sum_sq);
void RmsNormWithSumSq(const float* x, size_t ldx, const float* w, float* y, size_t ldy, size_t rows,
                      size_t width, const float* sum_sq, size_t full_width, float eps);

// Per-head RMSNorm (Qwen3's q_norm/k_norm): each head_dim slice of each row normalised alone.
void RmsNormPerHead(const float* x, size_t ldx, const float* w, float* y, size_t ldy, size_t rows,
                    size_t num_heads, size_t head_dim, float eps);

void RmsNormReference(const float* x, size_t ldx, const float* w, float* y, size_t ldy, size_t rows,
                      size_t width, float eps);

}  // namespace moeserve::kernels
