#include "kernels/fp8_panels.h"

#include <cstring>

#include "core/check.h"
#include "kernels/quant.h"

namespace moeserve::kernels {
namespace {

size_t ScaleBlocks(size_t cols, size_t col0) {
  return (col0 + cols + kFp8ScaleBlock - 1) / kFp8ScaleBlock - col0 / kFp8ScaleBlock;
}

}  // namespace

size_t Fp8PanelCodeBytes(size_t rows, size_t cols) {
  return (rows + kFp8PanelRows - 1) / kFp8PanelRows * kFp8PanelRows * cols;
}

size_t Fp8PanelScaleFloats(size_t rows, size_t cols, size_t col0) {
  return (rows + kFp8PanelRows - 1) / kFp8PanelRows * kFp8PanelRows * ScaleBlocks(cols, col0);
}

bool Fp8PanelRepackable(const WeightMatrix& w) {
  for (size_t r = 0; r < w.rows; ++r) {
    const auto* row = static_cast<const uint8_t*>(w.data) + r * w.row_stride;
    for (size_t c = 0; c < w.cols; ++c)
      if ((row[c] & 0x7f) == 0x7f) return false;
  }
  return true;
}

WeightMatrix RepackFp8Panels(const WeightMatrix& w, uint8_t* codes, float* scales) {
  MOESERVE_CHECK(w.format == WeightFormat::kFp8Block, "RepackFp8Panels: not an FP8 block view");
  const size_t panels = (w.rows + kFp8PanelRows - 1) / kFp8PanelRows;
  const size_t blocks = ScaleBlocks(w.cols, w.col0), b0 = w.col0 / kFp8ScaleBlock;
  const auto* src = static_cast<const uint8_t*>(w.data);
  const auto* src_scales = static_cast<const float*>(w.scales);
  for (size_t p = 0; p < panels; ++p) {
    uint8_t* panel = codes + p * w.cols * kFp8PanelRows;
    float* ps = scales + p * blocks * kFp8PanelRows;
    for (size_t r = 0; r < kFp8PanelRows; ++r) {
      const size_t row = p * kFp8PanelRows + r;
      if (row >= w.rows) {
        for (size_t c = 0; c < w.cols; ++c) panel[c * kFp8PanelRows + r] = 0;
        for (size_t b = 0; b < blocks; ++b) ps[b * kFp8PanelRows + r] = 0.0f;
        continue;
      }
      const uint8_t* in = src + row * w.row_stride;
      for (size_t c = 0; c < w.cols; ++c) panel[c * kFp8PanelRows + r] = in[c];
      const float* srow = src_scales + ((w.row0 + row) / kFp8ScaleBlock) * w.scale_stride;
      for (size_t b = 0; b < blocks; ++b) ps[b * kFp8PanelRows + r] = srow[b0 + b];
    }
  }
  WeightMatrix v = w;
  v.format = WeightFormat::kFp8Panel;
  v.data = codes;
  v.scales = scales;
  v.row_stride = w.cols * kFp8PanelRows;
  v.scale_stride = blocks * kFp8PanelRows;
  v.row0 = 0;
  return v;
}

WeightMatrix Fp8PanelRows(const WeightMatrix& w, size_t n0, size_t n) {
  MOESERVE_CHECK(n0 % kFp8PanelRows == 0 && n0 + n <= w.rows, "Fp8PanelRows: rows [", n0, ", ",
                 n0 + n, ") of ", w.rows);
  WeightMatrix v = w;
  v.data = static_cast<const uint8_t*>(w.data) + n0 / kFp8PanelRows * w.row_stride;
  v.scales = static_cast<const float*>(w.scales) + n0 / kFp8PanelRows * w.scale_stride;
  v.rows = n;
  return v;
}

float Fp8PanelElement(const WeightMatrix& w, size_t r, size_t c) {
  const size_t p = r / kFp8PanelRows, lane = r % kFp8PanelRows;
  const uint8_t code =
      static_cast<const uint8_t*>(w.data)[p * w.row_stride + c * kFp8PanelRows + lane];
  const size_t b = (w.col0 + c) / kFp8ScaleBlock - w.col0 / kFp8ScaleBlock;
  const float s =
      static_cast<const float*>(w.scales)[p * w.scale_stride + b * kFp8PanelRows + lane];
  return E4M3ToFloat(code) * s;
}

}  // namespace moeserve::kernels
