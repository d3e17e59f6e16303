// RMSNorm. Memory-bound and small next to the matmuls, so one baseline implementation serves every
// ISA; the sum of squares uses 8 independent partial sums (vectorisable without reassociation
// flags, and more accurate than one running sum).
#include "kernels/norm.h"

#include <cmath>

#include "core/check.h"

namespace moeserve::kernels {
namespace {

float RowSumSq(const float* x, size_t width) {
  float part[8] = {};
  size_t i = 0;
  for (; i + 8 <= width; i += 8)
    for (int j = 0; j < 8; ++j) part[j] += x[i + j] * x[i + j];
  for (; i < width; ++i) part[i % 8] += x[i] * x[i];
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

void ScaleRow(const float* x, const float* w, float inv_rms, float* y, size_t width) {
  for (size_t i = 0; i < width; ++i) y[i] = w[i] * (x[i] * inv_rms);
}

}  // namespace

void SumOfSquares(const float* x, size_t ldx, size_t rows, size_t width, float* sum_sq) {
  for (size_t r = 0; r < rows; ++r) sum_sq[r] = RowSumSq(x + r * ldx, width);
}

void RmsNormWithSumSq(const float* x, size_t ldx, const float* w, float* y, size_t ldy, size_t rows,
                      size_t width, const float* sum_sq, size_t full_width, float eps) {
  MOESERVE_CHECK(full_width > 0, "RmsNorm over zero width");
  for (size_t r = 0; r < rows; ++r) {
    const float inv = 1.0f / std::sqrt(sum_sq[r] / static_cast<float>(full_width) + eps);
    ScaleRow(x + r * ldx, w, inv, y + r * ldy, width);
  }
}

void RmsNorm(const float* x, size_t ldx, const float* w, float* y, size_t ldy, size_t rows,
             size_t width, float eps) {
  for (size_t r = 0; r < rows; ++r) {
    const float ss = RowSumSq(x + r * ldx, width);
    RmsNormWithSumSq(x + r * ldx, ldx, w, y + r * ldy, ldy, 1, width, &ss, width, eps);
  }
}

void RmsNormPerHead(const float* x, size_t ldx, const float* w, float* y, size_t ldy, size_t rows,
                    size_t num_heads, size_t head_dim, float eps) {
  for (size_t r = 0; r < rows; ++r)
    RmsNorm(x + r * ldx, head_dim, w, y + r * ldy, head_dim, num_heads, head_dim, eps);
}

void RmsNormReference(const float* x, size_t ldx, const float* w, float* y, size_t ldy, size_t rows,
                      size_t width, float eps) {
  for (size_t r = 0; r < rows; ++r) {
    double ss = 0;  // reference sums in double: the fast path must be within f32 rounding of it
    for (size_t i = 0; i < width; ++i) ss += double{x[r * ldx + i]} * x[r * ldx + i];
    const float inv = 1.0f / std::sqrt(static_cast<float>(ss) / static_cast<float>(width) + eps);
    for (size_t i = 0; i < width; ++i) y[r * ldy + i] = w[i] * (x[r * ldx + i] * inv);
  }
}

}  // namespace moeserve::kernels
