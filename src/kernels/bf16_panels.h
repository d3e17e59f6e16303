// bf16 weights repacked once at load into 16-row panels (WeightFormat::kBf16Panel), the layout
// every ISA's bf16 GEMM / GEMV streams.
//
// Why: without a bf16 dot instruction the AVX2 kernels widen bf16 to f32 and FMA. Widening rows
// into a [k][16] panel on every call cost more than the FMAs for small batches (a 16-token decode
// step's attention projections ran at 12 GFLOP/s, pack-bound) and the row-at-a-time GEMV needed
// a horizontal sum per row. In panel layout one load holds 16 rows' weights for a column pair, and
// a whole matrix is one sequential stream.
//
// Layout: P = ceil(rows / 16) panels, each [cols rounded up to 32 / 2][16][2] bf16 (column pairs,
// then rows, then the pair's two columns), panel p at data + p · row_stride. Column pair i of a
// panel is 64 bytes, lane r = (W[16p + r, 2i], W[16p + r, 2i + 1]):
//  - a vdpbf16ps operand as it stands (AVX-512 BF16),
//  - 16 pairs are one AMX B tile, loaded straight from the panel (no per-call repacking),
//  - AVX2 widens a 32-byte half (8 rows) to f32 by a shift (column 2i) and a mask (2i + 1).
// Rows past `rows` and the columns past `cols` (to the multiple of 32 that makes the last tile
// whole) are +0: the same bytes as the checkpoint's for MiniMax-M2's shapes (k = 1536, 3072, 6144).
// In a WeightMatrix of format kBf16Panel: dtype kBF16, data = panel 0, row_stride =
// Bf16PanelCols(cols) · 16 (elements between panels).
//
// Numerics: identical to dense bf16 (x rounded to bf16, exact f32 products, f32 sums); only the
// order of the f32 sums is the kernel's.
#pragma once

#include <cstddef>

#include "kernels/weights.h"

namespace moeserve::kernels {

inline constexpr size_t kBf16PanelRows = 16;

// The f32 panel kernels (avx2, avx512) sum each row of y over blocks of this many columns: a
// chain of FMAs in column order from zero per block, the blocks added into y in order. The GEMV
// (one token) and the GEMM (several, any register tile) both do, so a token's y does not depend
// on the batch it came in (a seeded sample is the same alone or among other requests).
inline constexpr size_t kBf16PanelSumCols = 256;

// Columns a panel holds for cols columns: cols rounded up to a whole AMX tile step (32).
inline constexpr size_t Bf16PanelCols(size_t cols) {
  return (cols + 31) / 32 * 32;
}

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
