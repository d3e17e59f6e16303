#include "kernels/bf16_panels.h"

#include <algorithm>

#include "core/check.h"

namespace moeserve::kernels {
namespace {

// Index of W[16p + r, c] within panel p: see the header.
constexpr size_t InPanel(size_t r, size_t c) {
  return (c / 2) * 2 * kBf16PanelRows + r * 2 + c % 2;
}

}  // namespace

size_t Bf16PanelElems(size_t rows, size_t cols) {
  return (rows + kBf16PanelRows - 1) / kBf16PanelRows * kBf16PanelRows * Bf16PanelCols(cols);
}

WeightMatrix RepackBf16Panels(const WeightMatrix& w, bf16* out) {
  MOESERVE_CHECK(w.format == WeightFormat::kDense && w.dtype == DType::kBF16,
                 "RepackBf16Panels: not a dense bf16 view");
  MOESERVE_CHECK(w.row_stride >= w.cols, "RepackBf16Panels: row_stride ", w.row_stride, " < cols ",
                 w.cols);
  const auto* src = static_cast<const bf16*>(w.data);
  const size_t panels = (w.rows + kBf16PanelRows - 1) / kBf16PanelRows;
  const size_t stride = Bf16PanelCols(w.cols) * kBf16PanelRows;
  for (size_t p = 0; p < panels; ++p) {
    bf16* panel = out + p * stride;
    std::fill(panel, panel + stride, bf16{0});
    for (size_t r = 0; r < kBf16PanelRows && p * kBf16PanelRows + r < w.rows; ++r) {
      const bf16* in = src + (p * kBf16PanelRows + r) * w.row_stride;
      for (size_t c = 0; c < w.cols; ++c) panel[InPanel(r, c)] = in[c];
    }
  }
  WeightMatrix v = w;
  v.format = WeightFormat::kBf16Panel;
  v.data = out;
  v.row_stride = stride;
  v.row0 = v.col0 = 0;
  return v;
}

WeightMatrix Bf16PanelRows(const WeightMatrix& w, size_t n0, size_t n) {
  MOESERVE_CHECK(n0 % kBf16PanelRows == 0 && n0 + n <= w.rows, "Bf16PanelRows: rows [", n0, ", ",
                 n0 + n, ") of ", w.rows);
  WeightMatrix v = w;
  v.data = static_cast<const bf16*>(w.data) + n0 / kBf16PanelRows * w.row_stride;
  v.rows = n;
  return v;
}

bf16 Bf16PanelElement(const WeightMatrix& w, size_t r, size_t c) {
  const auto* panel = static_cast<const bf16*>(w.data) + r / kBf16PanelRows * w.row_stride;
  return panel[InPanel(r % kBf16PanelRows, c)];
}

}  // namespace moeserve::kernels
