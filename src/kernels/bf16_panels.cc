#include "kernels/bf16_panels.h"

#include <algorithm>

#include "core/check.h"

namespace moeserve::kernels {
namespace {

// Memory lane of row r (r < 16) within a panel column: see the header.
constexpr size_t LaneOfRow(size_t r) {
  return (r & 3) | ((r & 4) << 1) | ((r & 8) >> 1);
}

}  // namespace

size_t Bf16PanelElems(size_t rows, size_t cols) {
  return (rows + kBf16PanelRows - 1) / kBf16PanelRows * kBf16PanelRows * cols;
}

WeightMatrix RepackBf16Panels(const WeightMatrix& w, bf16* out) {
  MOESERVE_CHECK(w.format == WeightFormat::kDense && w.dtype == DType::kBF16,
                 "RepackBf16Panels: not a dense bf16 view");
  MOESERVE_CHECK(w.row_stride >= w.cols, "RepackBf16Panels: row_stride ", w.row_stride, " < cols ",
                 w.cols);
  const auto* src = static_cast<const bf16*>(w.data);
  const size_t panels = (w.rows + kBf16PanelRows - 1) / kBf16PanelRows;
  for (size_t p = 0; p < panels; ++p) {
    bf16* panel = out + p * w.cols * kBf16PanelRows;
    for (size_t r = 0; r < kBf16PanelRows; ++r) {
      const size_t row = p * kBf16PanelRows + r, lane = LaneOfRow(r);
      if (row >= w.rows) {
        for (size_t c = 0; c < w.cols; ++c) panel[c * kBf16PanelRows + lane] = bf16{0};
        continue;
      }
      const bf16* in = src + row * w.row_stride;
      for (size_t c = 0; c < w.cols; ++c) panel[c * kBf16PanelRows + lane] = in[c];
    }
  }
  WeightMatrix v = w;
  v.format = WeightFormat::kBf16Panel;
  v.data = out;
  v.row_stride = w.cols * kBf16PanelRows;
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
  return panel[c * kBf16PanelRows + LaneOfRow(r % kBf16PanelRows)];
}

}  // namespace moeserve::kernels
