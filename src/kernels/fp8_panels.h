// FP8-block weights (e4m3 codes, an f32 scale per 128 x 128 block) repacked once at load into
// 16-row panels (WeightFormat::kFp8Panel), the layout the AVX2 FP8 kernels stream.
//
// Why: AVX2 has no e4m3 conversion; decoding each row to f32 before a GEMV (the kFp8Block path)
// made decode compute-bound at ~40% of the read bandwidth, and a batch's GEMM decoded every panel
// again per call. Here one 16-byte load holds 16 rows' codes for one column, and
// fp16 bits = sign << 15 | (code & 0x7f) << 7 turn each code into an fp16 worth exactly
// e4m3 · 2^-8 (normals and subnormals alike: both formats have 3 / 10 mantissa bits below the
// same kind of exponent field), which F16C's vcvtph2ps widens to f32 exactly.
//
// Layout: P = ceil(rows / 16) panels.
//   codes  + p · cols · 16: [cols][16] bytes, lane r = row 16p + r (rows past `rows`: code 0).
//   scales + p · scale_stride: [B][16] f32, B = the 128-column scale blocks the view's columns
//          touch ((col0 + cols + 127) / 128 − col0 / 128), entry [b][r] = the scale of row
//          16p + r in the view's b-th block (padding rows: 0). So a panel's rows may straddle a
//          128-row scale boundary (tensor-parallel slices start anywhere).
// In a WeightMatrix of format kFp8Panel: dtype kF8E4M3, data = codes, scales = f32 table,
// row_stride = cols · 16 (bytes between panels), scale_stride = B · 16 (floats between panels),
// col0 = the view's first column in the full weight (its phase within a scale block), row0 = 0.
// Extra bytes: 64 per 128 columns of a panel, 3% over the codes.
//
// Numerics: W[r, c] = e4m3(code) · scale, as kFp8Block (Fp8PanelElement equals DequantizeRow of
// the source). The kernels may apply a block's scale to the block's partial sum instead of to
// each weight (f32 roundings of the same size as a reordered sum). The avx2 and avx512 tables'
// kernels all do, GEMVs and GEMMs alike, so that a token's y is the same bits in any batch: per
// row, a running sum from y (a call that adds into y) or zero; per 128-column scale block of the
// full weight, one FMA chain from zero over the block's columns in order, then running sum +=
// chain · scale in one FMA.
//
// The NaN codes (0x7f, 0xff) have no fp16 image under the rule above; a weight holding one is
// left in kFp8Block (Fp8PanelRepackable) and runs the exact per-row path.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/weights.h"

namespace moeserve::kernels {

inline constexpr size_t kFp8PanelRows = 16;
inline constexpr size_t kFp8ScaleBlock = 128;  // columns (and rows) per scale

size_t Fp8PanelCodeBytes(size_t rows, size_t cols);
size_t Fp8PanelScaleFloats(size_t rows, size_t cols, size_t col0);

// False when the kFp8Block view holds a NaN code.
bool Fp8PanelRepackable(const WeightMatrix& fp8_block);

// Repacks a kFp8Block view into codes (Fp8PanelCodeBytes) and scales (Fp8PanelScaleFloats
// floats). Returns the kFp8Panel view.
WeightMatrix RepackFp8Panels(const WeightMatrix& fp8_block, uint8_t* codes, float* scales);

// Rows [n0, n0 + n) of a kFp8Panel view; n0 % 16 == 0.
WeightMatrix Fp8PanelRows(const WeightMatrix& w, size_t n0, size_t n);

// W[r, c] of a kFp8Panel view as f32.
float Fp8PanelElement(const WeightMatrix& w, size_t r, size_t c);

// Columns [c0, c1) of a view starting at column col0 of its weight, cut where a 128-column scale
// block of the full weight ends: fn(c, end, b) for each piece, b the block's index counted from the
// view's first block (its scales at scales + b · kFp8PanelRows within a panel). With col0 % 4 == 0
// every cut but one at c1 falls on a 4-column group.
template <typename Fn>
[[gnu::always_inline]] inline void ForEachFp8ScaleBlock(size_t col0, size_t c0, size_t c1,
                                                        const Fn& fn) {
  for (size_t c = c0; c < c1;) {
    const size_t end_global = ((col0 + c) / kFp8ScaleBlock + 1) * kFp8ScaleBlock;
    const size_t end = end_global - col0 < c1 ? end_global - col0 : c1;
    fn(c, end, (col0 + c) / kFp8ScaleBlock - col0 / kFp8ScaleBlock);
    c = end;
  }
}

// The one-token GEMVs' walk (AVX2 and AVX-512): the view's full panels in pairs (j, j + half),
// two streams per core for the hardware prefetchers; pair(p, q) for each. Returns the first panel
// left for the caller's one-panel kernels (the odd full panel and a partial last one).
template <typename PairFn>
inline size_t ForEachFullFp8PanelPair(const WeightMatrix& w, const PairFn& pair) {
  const size_t half = w.rows / kFp8PanelRows / 2;
  for (size_t j = 0; j < half; ++j) pair(j, j + half);
  return 2 * half;
}

// The GF(2)-affine GEMVs' walk (amx 1-3 tokens, avx512 1-16): the view's panels in pairs
// (j, j + half), the last one alone when their count is odd; group(codes, scales, y, rows, n) with
// n (2 or 1) panels' codes, scales, first y column (y + panel · 16) and stored row counts.
template <typename GroupFn>
inline void ForEachFp8PanelPairOrLast(const WeightMatrix& w, float* y, const GroupFn& group) {
  const size_t panels = (w.rows + kFp8PanelRows - 1) / kFp8PanelRows, half = panels / 2;
  const auto* codes = static_cast<const uint8_t*>(w.data);
  const auto* scales = static_cast<const float*>(w.scales);
  auto rows_of = [&](size_t p) {
    return w.rows - p * kFp8PanelRows < kFp8PanelRows ? w.rows - p * kFp8PanelRows : kFp8PanelRows;
  };
  auto run = [&](size_t p, size_t q, size_t n) {
    const uint8_t* const pp[2] = {codes + p * w.row_stride, codes + q * w.row_stride};
    const float* const ps[2] = {scales + p * w.scale_stride, scales + q * w.scale_stride};
    float* const yp[2] = {y + p * kFp8PanelRows, y + q * kFp8PanelRows};
    const size_t rows[2] = {rows_of(p), rows_of(q)};
    group(pp, ps, yp, rows, n);
  };
  for (size_t j = 0; j < half; ++j) run(j, j + half, 2);
  if (panels % 2 == 1) run(panels - 1, panels - 1, 1);
}

}  // namespace moeserve::kernels
