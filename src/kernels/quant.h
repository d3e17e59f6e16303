// Quantized number formats: element conversions, the quantizers `moeserve quantize` and the tests
// use, dequantizers, and the FP8 KV-cache row format. Everything here is deterministic and
// written so that an independent implementation (numpy) can reproduce it bit for bit; the exact
// rules are in the comments.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/weights.h"

namespace moeserve::kernels {

// ---- element formats -------------------------------------------------------------------------

// OCP e4m3fn (torch.float8_e4m3fn): bias 7, subnormals m/8 · 2^-6, no infinities; 0x7f / 0xff are
// NaN. Exact (same as core/dtype.h F8E4M3ToF32).
float E4M3ToFloat(uint8_t code);
// Round to nearest, ties to even (on the code's mantissa), saturating: |f| >= 448 → ±448 (0x7e /
// 0xfe), NaN → 0x7f. The sign of a value that rounds to zero is kept (−1e-9 → 0x80, −0).
// Equals core/dtype.h F32ToF8E4M3 for every input (tested), but in constant time.
uint8_t FloatToE4M3(float f);

// OCP e2m1 (low 4 bits of `nibble`): 0, .5, 1, 1.5, 2, 3, 4, 6, then the same negated (8 = −0).
float E2M1ToFloat(uint8_t nibble);
// Round to nearest, ties to even code (i.e. to the value whose mantissa bit is 0): the ties
// .25→0, .75→1, 1.25→1, 1.75→2, 2.5→2, 3.5→4, 5→4; |f| > 6 saturates to 6; NaN → 7 (+6, there is
// no NaN in e2m1; quantizers never feed NaN). Sign bit = signbit(f), also when the magnitude
// rounds to 0 (−0.1 → 8).
uint8_t FloatToE2M1(float f);

// OCP e8m0 scale: 2^(e − 127) for e in 0..254 (e = 0 is 2^-127, an f32 subnormal); 255 is NaN.
float E8M0ToFloat(uint8_t e);

// ---- weight quantizers (row-major W[rows, cols] f32 in) ---------------------------------------

// MiniMax-M2 / DeepSeek-V3 FP8 block format (WeightFormat::kFp8Block). Per 128 × 128 block
// (edge blocks smaller): amax = max |w| over the block (f32), scale = amax / 448.0f (one f32
// division, round to nearest); amax == 0 → scale = 1. q[r, c] = FloatToE4M3(w[r, c] / scale)
// (one f32 division, then RNE to e4m3, saturating). scale_inv[rb, cb] = scale (the multiplier,
// as the checkpoint's weight_scale_inv). q: rows·cols bytes; scale_inv: ceil(rows/128) ×
// ceil(cols/128) floats, row-major. NaN inputs are not supported.
void QuantizeFp8Block(const float* w, size_t rows, size_t cols, uint8_t* q, float* scale_inv);

// OCP MX (MXFP4, WeightFormat::kMxfp4), groups of 32 consecutive columns; cols % 32 == 0.
// Per group: amax = max |w| (f32). exp = floor(log2(amax)) − 2 (2 = emax of e2m1), computed
// exactly from the f32 exponent (frexp), clamped to [−127, 127]; amax == 0 → exp = 0.
// scales_e8m0[r, g] = exp + 127. Element code = FloatToE2M1(w · 2^−exp) (the power-of-two scaling
// is exact in f32 for every finite w here), so values above 6 · 2^exp saturate to ±6.
// This is the OCP MX v1.0 rule (the "floor" scale mode of torchao / AMD Quark); it never
// overflows the group's largest element by more than the saturation to 6 allows (amax < 8·2^exp).
// packed: rows × cols/2 bytes, element 2i in the low nibble of byte i, 2i+1 in the high nibble.
// scales_e8m0: rows × cols/32 bytes.
void QuantizeMxfp4(const float* w, size_t rows, size_t cols, uint8_t* packed, uint8_t* scales_e8m0);

// W[r, c] of a kDense / kFp8Block / kMxfp4 view, exactly in f32 (e4m3 · f32 scale is one f32
// multiplication; e2m1 · 2^k is exact): out[r * ld_out + c] for r < w.rows, c < w.cols.
void DequantizeToF32(const WeightMatrix& w, float* out, size_t ld_out);
// One row of a view, W[row, c0 .. c0 + n) → out[0 .. n).
void DequantizeRow(const WeightMatrix& w, size_t row, size_t c0, size_t n, float* out);

// ---- FP8 KV cache ---------------------------------------------------------------------------
// A K or V cache block in FP8: [block_size, num_kv_heads, head_dim] e4m3 codes, then
// [block_size, num_kv_heads] f32 scales (the code area is padded to a multiple of 4 bytes).
// Vector (token p, kv head g) holds x[j] = E4M3ToFloat(code[j]) · scale[p, g].
// Why per (token, head): one scale per written vector needs no calibration and no rescaling of
// earlier tokens when a larger value arrives, keeps e4m3's 3-bit relative precision for every
// vector whatever the spread between tokens (attention sinks have much larger norms), and costs 4
// bytes per head_dim codes: 132 bytes vs 256 for bf16 at head_dim 128.

size_t KvBlockBytesFp8(size_t block_size, size_t num_kv_heads, size_t head_dim);

// x: [num_kv_heads, head_dim] f32 → codes [num_kv_heads, head_dim], scales [num_kv_heads]:
// per head, scale = amax / 448.0f (amax == 0 → 1), code = FloatToE4M3(x / scale).
void QuantizeKvRowFp8(const float* x, size_t num_kv_heads, size_t head_dim, uint8_t* codes,
                      float* scales);

// Quantizes x [num_kv_heads, head_dim] into row `row` of an FP8 block laid out as above.
void WriteKvRowFp8(const float* x, size_t num_kv_heads, size_t head_dim, size_t block_size,
                   size_t row, uint8_t* block);

// Byte offset of the scale area inside a block.
inline size_t KvScaleOffsetFp8(size_t block_size, size_t num_kv_heads, size_t head_dim) {
  return (block_size * num_kv_heads * head_dim + 3) / 4 * 4;
}

}  // namespace moeserve::kernels
