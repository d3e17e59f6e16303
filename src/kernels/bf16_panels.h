// bf16 weights repacked once at load into 16-row panels (WeightFormat::kBf16Panel), the layout
// the AVX2 GEMM/GEMV streams.
//
// Why: without a bf16 dot instruction the AVX2 kernels widen bf16 to f32 and FMA. Widening rows
// into a [k][16] panel on every call cost more than the FMAs for small batches (a 16-token decode
// step's attention projections ran at 12 GFLOP/s, pack-bound) and the row-at-a-time GEMV needed
// a horizontal sum per row. In panel layout one 32-byte load holds 16 rows' weights for one
// column, widened to two f32 vectors by two unpacks against zero, and a whole matrix is one
// sequential stream.
//
// Layout: P = ceil(rows / 16) panels, each [cols][16] bf16, panel p at data + p · cols · 16.
// Within column c of panel p the 16 lanes hold rows, in memory order,
//   16p + {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15}
// so that unpacklo_epi16(0, v) yields rows 16p + 0..7 and unpackhi_epi16(0, v) rows 16p + 8..15
// as f32 (vpunpck works within 128-bit lanes). Rows past `rows` are +0.
// The same bytes as the checkpoint's (2 per weight) but for the padding of the last panel.
// In a WeightMatrix of format kBf16Panel: dtype kBF16, data = panel 0, row_stride = cols · 16
// (elements between panels).
//
// Numerics: identical to dense bf16 (x rounded to bf16, exact f32 products, f32 sums); only the
// order of the f32 sums is the kernel's.
#pragma once

#include <cstddef>

#include "kernels/weights.h"

namespace moeserve::kernels {

inline constexpr size_t kBf16PanelRows = 16;

// Elements (bf16) a [rows, cols] matrix takes in panel layout.
size_t Bf16PanelElems(size_t rows, size_t cols);

// Repacks a dense bf16 view (any row_stride) into `out` (Bf16PanelElems elements). Returns the
// kBf16Panel view of it.
WeightMatrix RepackBf16Panels(const WeightMatrix& dense_bf16, bf16* out);

// The view of rows [n0, n0 + n) of a kBf16Panel matrix; n0 % 16 == 0.
WeightMatrix Bf16PanelRows(const WeightMatrix& w, size_t n0, size_t n);

// W[r, c] of a kBf16Panel view.
bf16 Bf16PanelElement(const WeightMatrix& w, size_t r, size_t c);

}  // namespace moeserve::kernels
