// MXFP4 weights repacked once at load for int8 dot products, and the int8 ("Q8") activations
// they multiply. This is the `--activation-dtype int8` path for MXFP4 checkpoints.
//
// Why: on a CPU without bf16 dot products (AVX2) an MXFP4 weight decoded to f32 costs more
// instructions than the memory it streams, so decode and prefill are compute-bound. e2m1 codes
// are small integers once doubled (0, ±1, ±2, ±3, ±4, ±6, ±8, ±12) and e8m0 scales are powers
// of two, so with activations quantized to int8 per 32-column block, each block's dot product
// is an exact integer (vpmaddubsw / vpmaddwd on AVX2, vpdpbusd with VNNI) scaled once.
//
// Numerics (every path, the scalar reference and the PyTorch reference's int8 mode agree):
//  activations, per token row and 32-column block b (k % 32 == 0):
//    amax = max |x[i]| over the block; d = amax / 127.0f (one f32 division); amax == 0 → d = 0
//    and q = 0; else q[i] = clamp(round_half_even(x[i] / d), -127, 127) (one f32 division).
//    sum = Σ q[i] over the block (kept for kernels that offset the weights to unsigned).
//  y[t, r] = acc after, for b = 0, 1, ... in order (acc starts at 0.0f, or at y for accumulate
//    — see below):  acc = fmaf(float(S_b), dw_b * (0.5f * d_b), acc),
//    where S_b = Σ_i (2 · e2m1(code[r, 32b + i])) · q[t, 32b + i] is the exact integer dot
//    product (|S_b| ≤ 32 · 12 · 127), dw_b = E8M0ToFloat(scale[r, b]) (2^(e − 127); e = 0 is
//    2^-127, e = 255 NaN) and d_b is token t's block scale. All products and the fmaf are f32.
//    With accumulate, y[t, r] += acc (one f32 addition after the block loop).
//  So every ISA path equals the scalar reference bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/weights.h"

namespace moeserve::kernels {

inline constexpr size_t kMxfp4I8Block = 32;     // columns per scale (activations and weights)
inline constexpr size_t kMxfp4I8GroupRows = 8;  // rows per repacked group (below)

// ---- Q8 activations -------------------------------------------------------------------------

// m token rows of k columns (k % 32 == 0), each quantized as above. Row t: q + t·ldq (ldq ≥ k,
// bytes), d + t·ldd and sum + t·ldd (ldd ≥ k / 32).
struct Q8Rows {
  const int8_t* q = nullptr;
  const float* d = nullptr;
  const int32_t* sum = nullptr;
  size_t ldq = 0, ldd = 0, m = 0, k = 0;
};

// One row x[0, k) → q[0, k), d[0, k/32), sum[0, k/32). Scalar reference of the rule above.
void QuantizeRowQ8Reference(const float* x, size_t k, int8_t* q, float* d, int32_t* sum);

// ---- MXFP4 repacked in 8-row groups (WeightFormat::kMxfp4I8) -------------------------------
//
// A [rows, cols] MXFP4 matrix (cols % 32 == 0) is stored as G = ceil(rows / 8) row groups of
// B = cols / 32 blocks. Group g, block b:
//   codes  + (g · B + b) · 128: 4 chunks of 32 bytes. Byte 4·r + j of chunk c (r < 8, j < 4)
//          holds, in its low nibble, the e2m1 code of row 8g + r, column 32b + 8c + j, and in
//          its high nibble that of column 32b + 8c + 4 + j. So the low nibbles of one 32-byte
//          chunk are 8 rows × 4 consecutive columns (one int32 lane per row), as are the high
//          nibbles: a broadcast of 4 x bytes against them gives each row's partial dot product
//          in its own lane, with no horizontal sums.
//   scales + (g · B + b) · 8: the e8m0 scale of block b of rows 8g .. 8g + 7.
// Rows past `rows` in the last group are padding: codes 0 and scale 127 (weights +0).
// The same bytes as the checkpoint's (no expansion): cols/2 + cols/32 bytes per row.
// In a WeightMatrix of format kMxfp4I8: data = codes of group 0, scales = scales of group 0,
// row_stride = B · 128 (bytes between groups), scale_stride = B · 8, dtype kU8.
size_t Mxfp4I8CodeBytes(size_t rows, size_t cols);
size_t Mxfp4I8ScaleBytes(size_t rows, size_t cols);

// Repacks a kMxfp4 view (any row_stride / scale_stride) into the layout above; codes and scales
// must hold Mxfp4I8CodeBytes / Mxfp4I8ScaleBytes. Returns the kMxfp4I8 view of them.
WeightMatrix RepackMxfp4I8(const WeightMatrix& mxfp4, uint8_t* codes, uint8_t* scales);

// The view of rows [n0, n0 + n) of a kMxfp4I8 matrix; n0 % 8 == 0.
WeightMatrix Mxfp4I8Rows(const WeightMatrix& w, size_t n0, size_t n);

// W[r, c] of a kMxfp4I8 view as f32 (e2m1 · 2^(e−127), exact).
float Mxfp4I8Element(const WeightMatrix& w, size_t r, size_t c);

// y[t, r] (= or +=) for t < x.m, r < w.rows, by the rule above; scalar reference.
void MatMulMxfp4I8Reference(const Q8Rows& x, const WeightMatrix& w, float* y, size_t ldy,
                            bool accumulate);

}  // namespace moeserve::kernels
