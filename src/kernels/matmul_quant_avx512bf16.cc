// AVX-512 BF16 kernels on quantized weights (this TU is built with the AVX-512 BF16 flags).
//
// Both formats decode to bf16 EXACTLY, in registers, and feed vdpbf16ps. vdpbf16ps treats bf16
// subnormals as zero, so every decoded weight must be a normal bf16 (or ±0).
// GEMM (m >= 8) decodes 32-row panels in column order, 32 weights at a time:
//  e4m3: the code's 7 magnitude bits shifted into a bf16's exponent/mantissa and the exponent
//        rebiased (+120); subnormal codes (exponent field 0, m · 2^-9) come from an 8-entry
//        table (vpermw).
//  e2m1: a 16-entry table (vpermw) gives the bf16 of the code's value; the group's e8m0 scale
//        2^(s − 127) is added to the exponent field of the nonzero ones. Exact while the result
//        stays a normal bf16, i.e. for s in [2, 252]; a panel with a scale outside takes the GEMV.
// GEMV (m < 8, the decode: bound by the decode's instructions, not by memory, when done as above)
// decodes 64 code bytes per step into a permuted order and permutes x to match once per call; see
// "GEMV" below. Its MXFP4 scales multiply each group's f32 partial sum (exact for every e8m0).
// FP8's f32 block scale cannot be folded into bf16 exactly, so partial dot products are kept per
// 128-column scale block and multiplied by the block's scale (GEMV: in registers; GEMM: the bf16
// GEMM runs one block of columns at a time into a small buffer that is scaled into y).
// Against the reference (W dequantized in f32, running f32 sum) only the summation order and the
// rounding of e4m3 · scale differ: products x · w are exact in both.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "core/check.h"
#include "kernels/internal.h"
#include "kernels/simd_math_avx512.h"
#include "kernels/transpose_avx512.h"

namespace moeserve::kernels::avx512bf16 {
namespace {

constexpr size_t kFp8Block = 128;
constexpr size_t kPanel = 32;

// bf16 bits of m · 2^-9 (the e4m3 subnormals), m = 0..7; entries 8..31 unused.
alignas(64) const uint16_t kE4M3Subnormal[32] = {0x0000, 0x3B00, 0x3B80, 0x3BC0,
                                                 0x3C00, 0x3C20, 0x3C40, 0x3C60};
// bf16 bits of the 16 e2m1 values, twice (vpermw index = a nibble plus one junk bit).
alignas(64) const uint16_t kE2M1Bf16[32] = {
    0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0, 0x8000, 0xBF00, 0xBF80,
    0xBFC0, 0xC000, 0xC040, 0xC080, 0xC0C0, 0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040,
    0x4080, 0x40C0, 0x8000, 0xBF00, 0xBF80, 0xBFC0, 0xC000, 0xC040, 0xC080, 0xC0C0};

inline __m512bh AsBh(__m512i v) {
  return (__m512bh)v;
}

// 32 e4m3 codes (one per 16-bit lane) → their bf16 encodings.
inline __m512i Fp8ToBf16(__m512i u, __m512i sub_lut) {
  const __m512i mag = _mm512_and_si512(u, _mm512_set1_epi16(0x7f));
  __m512i v = _mm512_add_epi16(_mm512_slli_epi16(mag, 4), _mm512_set1_epi16(120 << 7));
  const __mmask32 sub = _mm512_testn_epi16_mask(u, _mm512_set1_epi16(0x78));
  v = _mm512_mask_permutexvar_epi16(v, sub, mag, sub_lut);
  // Sign: bit 7 of the code to bit 15 (ternary logic 0xF8 = A | (B & C)).
  return _mm512_ternarylogic_epi32(v, _mm512_slli_epi16(u, 8), _mm512_set1_epi16(int16_t(0x8000)),
                                   0xF8);
}

inline __m512i LoadFp8(const uint8_t* p, __mmask32 mask) {
  return _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(mask, p));
}

// Rows [r0, r0 + nr) (nr ≤ 32) of an FP8 range decoded to bf16 in GemmBf16's packed layout:
// column pair p of row r as the int32 at pack + (p · 32 + r) · 2 elements (rows ≥ nr and columns
// ≥ k zero).
inline void DecodeFp8Packed(const QuantRows& w, size_t r0, size_t nr, bf16* pack, __m512i sub_lut) {
  const size_t pairs = (w.k + 1) / 2;
  int32_t* out = reinterpret_cast<int32_t*>(pack);
  for (size_t half = 0; half < 2; ++half) {
    for (size_t p0 = 0; p0 < pairs; p0 += 16) {
      const size_t c0 = 2 * p0;
      const __mmask32 mask = TailMask32(w.k - c0);
      __m512i r[16];
      for (size_t i = 0; i < 16; ++i) {
        const size_t j = half * 16 + i;
        const uint8_t* codes = w.codes + (r0 + j) * w.row_stride + c0;
        r[i] = j < nr ? Fp8ToBf16(LoadFp8(codes, mask), sub_lut) : _mm512_setzero_si512();
      }
      Transpose16x16(r);
      const size_t n = pairs - p0 < 16 ? pairs - p0 : 16;
      for (size_t c = 0; c < n; ++c) _mm512_store_si512(out + (p0 + c) * 32 + half * 16, r[c]);
    }
  }
}

// 16 bytes = 32 e2m1 codes (element 2i in the low nibble of byte i) → bf16 of value · 2^e, where
// exp_add holds e · 128 in every 16-bit lane (e = 0: the plain e2m1 values).
inline __m512i Mxfp4ToBf16(const uint8_t* p, __m512i exp_add, __m512i lut) {
  const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  // Low word of lane i = byte i & 15, high word = byte i >> 4: (d | d << 12) & 0x000f000f.
  const __m512i idx =
      _mm512_ternarylogic_epi32(d, _mm512_slli_epi32(d, 12), _mm512_set1_epi32(0x000f000f), 0xA8);
  const __m512i v = _mm512_permutexvar_epi16(idx, lut);
  const __mmask32 nonzero = _mm512_test_epi16_mask(v, _mm512_set1_epi16(0x7fff));
  return _mm512_mask_add_epi16(v, nonzero, v, exp_add);
}

inline bool ScaleFoldsIntoBf16(uint8_t s) {
  return s >= 2 && s <= 252;
}
inline __m512i ExpAdd(uint8_t s) {
  return _mm512_set1_epi16(static_cast<int16_t>((static_cast<int>(s) - 127) * 128));
}

template <int M>
inline void StoreSums(const __m512* acc, float* y, size_t ldy, bool accumulate) {
  for (int t = 0; t < M; ++t) {
    const float s = _mm512_reduce_add_ps(acc[t]);
    float& out = y[t * ldy];
    out = accumulate ? out + s : s;
  }
}

// One FP8 weight row · M tokens. Columns are walked one scale block at a time ([a, b) in view
// coordinates; a view's col0 need not be a multiple of 128, so the first block may be short).
template <int M>
void Fp8RowDot(const bf16* xb, size_t ldxb, const uint8_t* codes, const float* scales_row,
               size_t col0, size_t k, float* y, size_t ldy, bool accumulate, __m512i sub_lut) {
  __m512 total[M];
  for (int t = 0; t < M; ++t) total[t] = _mm512_setzero_ps();
  for (size_t a = 0; a < k;) {
    const size_t blk = (col0 + a) / kFp8Block;
    const size_t end = (blk + 1) * kFp8Block - col0, b = end < k ? end : k;
    __m512 p0[M], p1[M];
    for (int t = 0; t < M; ++t) p0[t] = p1[t] = _mm512_setzero_ps();
    size_t i = a;
    for (; i + 64 <= b; i += 64) {
      const __m512i w0 = Fp8ToBf16(LoadFp8(codes + i, ~__mmask32(0)), sub_lut);
      const __m512i w1 = Fp8ToBf16(LoadFp8(codes + i + 32, ~__mmask32(0)), sub_lut);
      for (int t = 0; t < M; ++t) {
        p0[t] = _mm512_dpbf16_ps(p0[t], AsBh(_mm512_loadu_si512(xb + t * ldxb + i)), AsBh(w0));
        p1[t] = _mm512_dpbf16_ps(p1[t], AsBh(_mm512_loadu_si512(xb + t * ldxb + i + 32)), AsBh(w1));
      }
    }
    for (; i < b; i += 32) {
      const __mmask32 mask = TailMask32(b - i);
      const __m512i w0 = Fp8ToBf16(LoadFp8(codes + i, mask), sub_lut);
      for (int t = 0; t < M; ++t)
        p0[t] = _mm512_dpbf16_ps(p0[t], AsBh(_mm512_maskz_loadu_epi16(mask, xb + t * ldxb + i)),
                                 AsBh(w0));
    }
    const __m512 vs = _mm512_set1_ps(scales_row[blk]);
    for (int t = 0; t < M; ++t)
      total[t] = _mm512_fmadd_ps(_mm512_add_ps(p0[t], p1[t]), vs, total[t]);
    a = b;
  }
  StoreSums<M>(total, y, ldy, accumulate);
}

// Any col0: 32 codes per step in column order (x used as is).
void GemvFp8Unaligned(const bf16* xb, size_t ldxb, size_t m, const QuantRows& w, float* y,
                      size_t ldy, bool accumulate) {
  const __m512i sub_lut = _mm512_load_si512(kE4M3Subnormal);
  const float* scales = static_cast<const float*>(w.scales);
  for (size_t r = 0; r < w.rows; ++r) {
    const uint8_t* codes = w.codes + r * w.row_stride;
    const float* srow = scales + ((w.row0 + r) / kFp8Block) * w.scale_stride;
    size_t t = 0;
    for (; t + 4 <= m; t += 4)
      Fp8RowDot<4>(xb + t * ldxb, ldxb, codes, srow, w.col0, w.k, y + t * ldy + r, ldy, accumulate,
                   sub_lut);
    const bf16* xt = xb + t * ldxb;
    float* yt = y + t * ldy + r;
    switch (m - t) {
      case 3:
        Fp8RowDot<3>(xt, ldxb, codes, srow, w.col0, w.k, yt, ldy, accumulate, sub_lut);
        break;
      case 2:
        Fp8RowDot<2>(xt, ldxb, codes, srow, w.col0, w.k, yt, ldy, accumulate, sub_lut);
        break;
      case 1:
        Fp8RowDot<1>(xt, ldxb, codes, srow, w.col0, w.k, yt, ldy, accumulate, sub_lut);
        break;
      default:
        break;
    }
  }
}

// ---- GEMV: 64 code bytes per step, no cross-lane shuffle of the weights -------------------
// The decode reads 64 code bytes per step (64 e4m3 or 128 e2m1 weights) and builds bf16 words with
// shifts and one table shuffle per 32 weights, leaving them in the order that is cheapest to make
// (e4m3: even and odd codes apart; e2m1: nibble r of each 16-bit word apart). x, shared by every
// row, is permuted once per call into the same order (PermuteXFp8 / PermuteXMxfp4), so the weights
// are never rearranged. ~3x fewer instructions per weight than decoding 32 weights per step in
// column order, which made these GEMVs compute-bound on 2 Zen 4 cores.

// Software prefetch distance for m > 1. Measured from DRAM on one Zen 4 core: m = 4 went from 7.5
// to 11.9 GB/s (FP8) and 6.5 to 9.5 (MXFP4) with 3 KiB; m = 1, which consumes fastest, gained
// nothing (the hardware prefetcher keeps up there).
constexpr size_t kPrefetchBytes = 3072;
constexpr size_t kXpElems = 16384;  // permuted-x panel, bf16 (32 KiB of stack)
constexpr size_t kMaxBatch = 8;     // tokens per pass over the weights

// Panel columns for `tokens` x rows: a multiple of 128 (an FP8 scale block, one MXFP4 step).
inline size_t PanelCols(size_t tokens) {
  return kXpElems / tokens / 128 * 128;
}

inline __mmask64 TailMask64(size_t n) {
  return n >= 64 ? ~__mmask64(0) : (__mmask64(1) << n) - 1;
}

inline __m512i Table16(const uint8_t* t) {
  return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t)));
}

// e4m3 code S EEEE MMM → bf16. Normal codes (E > 0): exponent E + 120 (bias 127 − 7), so the
// bf16's low byte is (E & 1) << 7 | M << 4 = (code << 4) & 0xF0 and its high byte is
// S | (60 + (E >> 1)), a 16-entry table of the code's high nibble. With u = the code shifted so
// that its nibbles sit at bits 4..11 of a word, the low byte is already in place and vpshufb on the
// odd bytes only (merge-masked) replaces the high byte by its table entry: 2 shifts, 2 ands and 2
// shuffles for 64 codes. Subnormal codes (E = 0: M · 2^-9, which vdpbf16ps would flush if encoded
// as bf16 subnormals) are rare in real weights (|w| < amax / 28672 of its block) and are patched
// from an 8-entry table when a vector has any.
alignas(16) const uint8_t kFp8Hi[16] = {0x3C, 0x3D, 0x3E, 0x3F, 0x40, 0x41, 0x42, 0x43,
                                        0xBC, 0xBD, 0xBE, 0xBF, 0xC0, 0xC1, 0xC2, 0xC3};

// 64 e4m3 codes (word j = codes 2j, 2j + 1) → even (word j: code 2j), odd (word j: code 2j + 1).
inline void DecodeFp8x64(__m512i w, __m512i hi_table, __m512i& even, __m512i& odd) {
  const __m512i keep = _mm512_set1_epi16(0x0FF0);
  const __mmask64 high_bytes = 0xAAAAAAAAAAAAAAAAull;
  const __m512i ue = _mm512_and_si512(_mm512_slli_epi16(w, 4), keep);
  const __m512i uo = _mm512_and_si512(_mm512_srli_epi16(w, 4), keep);
  even = _mm512_mask_shuffle_epi8(ue, high_bytes, hi_table, ue);
  odd = _mm512_mask_shuffle_epi8(uo, high_bytes, hi_table, uo);
  const __mmask32 sub_even = _mm512_testn_epi16_mask(w, _mm512_set1_epi16(0x0078));
  const __mmask32 sub_odd = _mm512_testn_epi16_mask(w, _mm512_set1_epi16(0x7800));
  if (__builtin_expect((sub_even | sub_odd) != 0, 0)) {
    // |value| from the table (vpermw reads the low 5 bits: M, then E's two low bits, 0 here),
    // the sign bit kept from the table-decoded word (ternary logic 0xE4: C ? A : B).
    const __m512i table = _mm512_load_si512(kE4M3Subnormal);
    const __m512i magnitude = _mm512_set1_epi16(0x7fff);
    even = _mm512_mask_mov_epi16(
        even, sub_even,
        _mm512_ternarylogic_epi32(_mm512_permutexvar_epi16(w, table), even, magnitude, 0xE4));
    odd = _mm512_mask_mov_epi16(
        odd, sub_odd,
        _mm512_ternarylogic_epi32(_mm512_permutexvar_epi16(_mm512_srli_epi16(w, 8), table), odd,
                                  magnitude, 0xE4));
  }
}

// x[0, kc) → out in DecodeFp8x64's order, per 64 columns [evens | odds]; zero past kc (to 64).
void PermuteXFp8(const bf16* x, size_t kc, bf16* out) {
  alignas(64) static const int16_t kEven[32] = {0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20,
                                                22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 42,
                                                44, 46, 48, 50, 52, 54, 56, 58, 60, 62};
  const __m512i even = _mm512_load_si512(kEven);
  const __m512i odd = _mm512_add_epi16(even, _mm512_set1_epi16(1));
  for (size_t i = 0; i < kc; i += 64) {
    const size_t n = kc - i;
    const __m512i x0 = _mm512_maskz_loadu_epi16(TailMask32(n), x + i);
    const __m512i x1 = _mm512_maskz_loadu_epi16(TailMask32(n > 32 ? n - 32 : 0), x + i + 32);
    _mm512_store_si512(out + i, _mm512_permutex2var_epi16(x0, even, x1));
    _mm512_store_si512(out + i + 32, _mm512_permutex2var_epi16(x0, odd, x1));
  }
}

// 128 e2m1 codes (64 bytes = 32 words; word j holds elements 4j .. 4j + 3, one per nibble, so
// lane l holds group l) → v[r] word j = element 4j + r: vpermw reads the low 5 bits of each word
// as its index, so the table of 16 values repeated twice needs no masking of the next nibble.
inline void DecodeMxfp4x128(__m512i c, __m512i table, __m512i* v) {
  v[0] = _mm512_permutexvar_epi16(c, table);
  v[1] = _mm512_permutexvar_epi16(_mm512_srli_epi16(c, 4), table);
  v[2] = _mm512_permutexvar_epi16(_mm512_srli_epi16(c, 8), table);
  v[3] = _mm512_permutexvar_epi16(_mm512_srli_epi16(c, 12), table);
}

// x[0, kc) (kc % 32 == 0) → out in DecodeMxfp4x128's order, per 128 columns [v0 | v1 | v2 | v3].
void PermuteXMxfp4(const bf16* x, size_t kc, bf16* out) {
  // Within 32 columns: lane r of the result = columns r, r + 4, ..., r + 28.
  alignas(64) static const int16_t kIdx[32] = {0,  4,  8,  12, 16, 20, 24, 28, 1,  5,  9,
                                               13, 17, 21, 25, 29, 2,  6,  10, 14, 18, 22,
                                               26, 30, 3,  7,  11, 15, 19, 23, 27, 31};
  const __m512i idx = _mm512_load_si512(kIdx);
  for (size_t i = 0; i < kc; i += 128) {
    __m512i y[4];
    for (size_t l = 0; l < 4; ++l) {
      const size_t c = i + 32 * l;
      const __mmask32 mask = c < kc ? TailMask32(kc - c) : 0;
      y[l] = _mm512_permutexvar_epi16(idx, _mm512_maskz_loadu_epi16(mask, x + c));
    }
    // v_r = lane r of y0, y1, y2, y3 (a 4 × 4 transpose of 128-bit lanes).
    const __m512i a = _mm512_shuffle_i64x2(y[0], y[1], 0x44);
    const __m512i b = _mm512_shuffle_i64x2(y[0], y[1], 0xEE);
    const __m512i c = _mm512_shuffle_i64x2(y[2], y[3], 0x44);
    const __m512i d = _mm512_shuffle_i64x2(y[2], y[3], 0xEE);
    _mm512_store_si512(out + i, _mm512_shuffle_i64x2(a, c, 0x88));
    _mm512_store_si512(out + i + 32, _mm512_shuffle_i64x2(a, c, 0xDD));
    _mm512_store_si512(out + i + 64, _mm512_shuffle_i64x2(b, d, 0x88));
    _mm512_store_si512(out + i + 96, _mm512_shuffle_i64x2(b, d, 0xDD));
  }
}

// vpshufb control moving byte l of a broadcast dword into the top byte of every dword of lane l.
alignas(64) const uint32_t kScaleToLane[16] = {
    0xff,     0xff,     0xff,     0xff,     0xff00,     0xff00,     0xff00,     0xff00,
    0xff0000, 0xff0000, 0xff0000, 0xff0000, 0xff000000, 0xff000000, 0xff000000, 0xff000000};

// acc + (x0·w0 + x1·w1 + x2·w2 + x3·w3) · s. For one token the four vdpbf16ps run as two chains
// (one chain of four is latency-bound); several tokens already give the core independent chains,
// and one chain saves the add.
template <int M>
inline __m512 Dot4Scaled(__m512 acc, __m512i x0, __m512i x1, __m512i x2, __m512i x3,
                         const __m512i* w, __m512 s) {
  __m512 p = _mm512_dpbf16_ps(_mm512_setzero_ps(), AsBh(x0), AsBh(w[0]));
  if constexpr (M == 1) {
    __m512 q = _mm512_dpbf16_ps(_mm512_setzero_ps(), AsBh(x1), AsBh(w[1]));
    p = _mm512_dpbf16_ps(p, AsBh(x2), AsBh(w[2]));
    q = _mm512_dpbf16_ps(q, AsBh(x3), AsBh(w[3]));
    return _mm512_fmadd_ps(_mm512_add_ps(p, q), s, acc);
  }
  p = _mm512_dpbf16_ps(p, AsBh(x1), AsBh(w[1]));
  p = _mm512_dpbf16_ps(p, AsBh(x2), AsBh(w[2]));
  p = _mm512_dpbf16_ps(p, AsBh(x3), AsBh(w[3]));
  return _mm512_fmadd_ps(p, s, acc);
}

template <int M>
inline void AddSums(const __m512* acc, float* y, size_t ldy, bool add) {
  for (int t = 0; t < M; ++t) {
    const float s = _mm512_reduce_add_ps(acc[t]);
    float& out = y[t * ldy];
    out = add ? out + s : s;
  }
}

// R FP8 rows (codes + r·code_stride, scales srow[r]) × M tokens over a panel: codes[0, kc),
// permuted x rows xp + t·ldxp, scale of column i = srow[r][(colbase + i) / 128], colbase % 64 == 0.
// Several rows share each x load (x is 4x the code bytes per token: loads bound one row alone).
template <int M, int R>
void Fp8PanelDot(const bf16* xp, size_t ldxp, const uint8_t* codes, size_t code_stride,
                 const float* const* srow, size_t colbase, size_t kc, __m512i table, float* y,
                 size_t ldy, bool add) {
  __m512 acc[R][M];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < M; ++t) acc[r][t] = _mm512_setzero_ps();
  for (size_t i = 0; i < kc;) {
    const size_t blk = (colbase + i) / kFp8Block;
    const size_t block_end = (blk + 1) * kFp8Block - colbase;
    __m512 s[R];
    for (int r = 0; r < R; ++r) s[r] = _mm512_set1_ps(srow[r][blk]);
    if (block_end - i == 128 && block_end <= kc) {
      // A whole block: two 64-code steps, partial sums in two chains (vdpbf16ps latency).
      __m512i w[R][4];
      for (int r = 0; r < R; ++r) {
        const uint8_t* c = codes + r * code_stride + i;
        if constexpr (M > 1) {
          _mm_prefetch(reinterpret_cast<const char*>(c) + kPrefetchBytes, _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(c) + kPrefetchBytes + 64, _MM_HINT_T0);
        }
        DecodeFp8x64(_mm512_loadu_si512(c), table, w[r][0], w[r][1]);
        DecodeFp8x64(_mm512_loadu_si512(c + 64), table, w[r][2], w[r][3]);
      }
      for (int t = 0; t < M; ++t) {
        const bf16* x = xp + t * ldxp + i;
        const __m512i x0 = _mm512_load_si512(x), x1 = _mm512_load_si512(x + 32);
        const __m512i x2 = _mm512_load_si512(x + 64), x3 = _mm512_load_si512(x + 96);
        for (int r = 0; r < R; ++r) {
          acc[r][t] = Dot4Scaled<M>(acc[r][t], x0, x1, x2, x3, w[r], s[r]);
        }
      }
      i = block_end;
      continue;
    }
    // A block cut by the view or panel edge: 64-code steps, the last one masked.
    const size_t end = block_end < kc ? block_end : kc;
    __m512 p[R][M];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < M; ++t) p[r][t] = _mm512_setzero_ps();
    for (; i < end; i += 64) {
      const __mmask64 mask = TailMask64(kc - i);
      for (int r = 0; r < R; ++r) {
        __m512i a, b;
        DecodeFp8x64(_mm512_maskz_loadu_epi8(mask, codes + r * code_stride + i), table, a, b);
        for (int t = 0; t < M; ++t) {
          const bf16* x = xp + t * ldxp + i;
          p[r][t] = _mm512_dpbf16_ps(p[r][t], AsBh(_mm512_load_si512(x)), AsBh(a));
          p[r][t] = _mm512_dpbf16_ps(p[r][t], AsBh(_mm512_load_si512(x + 32)), AsBh(b));
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < M; ++t) acc[r][t] = _mm512_fmadd_ps(p[r][t], s[r], acc[r][t]);
  }
  for (int r = 0; r < R; ++r) AddSums<M>(acc[r], y + r, ldy, add);
}

// True if a scale of the row is 0 (2^-127, an f32 subnormal) or 255 (NaN): s << 23 is not the
// f32 of 2^(s − 127) for those.
inline bool HasOddScale(const uint8_t* scales, size_t n) {
  for (size_t i = 0; i < n; i += 64) {
    const __m512i s = _mm512_maskz_loadu_epi8(TailMask64(n - i), scales + i);
    const __mmask64 in = TailMask64(n - i);
    if (_mm512_mask_cmpeq_epi8_mask(in, s, _mm512_setzero_si512()) |
        _mm512_mask_cmpeq_epi8_mask(in, s, _mm512_set1_epi8(-1)))
      return true;
  }
  return false;
}

// f32 2^(s − 127) of the 4 scales in the low bytes of `s4` (broadcast), scale l in lane l.
template <bool kOddScales>
inline __m512 LaneScales(__m512i s4, __m512i scale_ctrl) {
  // Lane l keeps byte l and rotates it to bits 23..30 (rotate left by 23 − 8l mod 32).
  const __m512i rot = _mm512_set_epi32(31, 31, 31, 31, 7, 7, 7, 7, 15, 15, 15, 15, 23, 23, 23, 23);
  __m512i bits = _mm512_rolv_epi32(_mm512_and_si512(s4, scale_ctrl), rot);
  if constexpr (kOddScales) {
    bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(bits, _mm512_setzero_si512()),
                                 _mm512_set1_epi32(0x00400000));
    bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(bits, _mm512_set1_epi32(0x7f800000)),
                                 _mm512_set1_epi32(0x7fc00000));
  }
  return _mm512_castsi512_ps(bits);
}

// R MXFP4 rows (codes + r·code_stride, scales + r·scale_stride) × M tokens over a panel
// (kc % 32 == 0). The per-lane partial of each 128 columns holds one group per 128-bit lane and is
// multiplied by that group's 2^(s − 127) in f32 (exact: a power of two), so every e8m0 scale takes
// the same path. Several rows share each x load (x is 4x the code bytes per token).
template <int M, int R, bool kOddScales>
void Mxfp4PanelDot(const bf16* xp, size_t ldxp, const uint8_t* codes, size_t code_stride,
                   const uint8_t* scales, size_t scale_stride, size_t kc, __m512i table,
                   __m512i scale_ctrl, float* y, size_t ldy, bool add) {
  __m512 acc[R][M];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < M; ++t) acc[r][t] = _mm512_setzero_ps();
  for (size_t i = 0; i < kc; i += 128) {
    __m512i v[R][4];
    __m512 sv[R];
    for (int r = 0; r < R; ++r) {
      const uint8_t* c = codes + r * code_stride + i / 2;
      const uint8_t* sc = scales + r * scale_stride + i / 32;
      __m512i cv, s4;
      if (kc - i >= 128) {
        if constexpr (M > 1)
          _mm_prefetch(reinterpret_cast<const char*>(c) + kPrefetchBytes, _MM_HINT_T0);
        cv = _mm512_loadu_si512(c);
        s4 = _mm512_broadcastd_epi32(_mm_loadu_si32(sc));
      } else {
        cv = _mm512_maskz_loadu_epi8(TailMask64((kc - i) / 2), c);
        s4 = _mm512_broadcastd_epi32(_mm_maskz_loadu_epi8(TailMask16((kc - i) / 32), sc));
      }
      DecodeMxfp4x128(cv, table, v[r]);
      sv[r] = LaneScales<kOddScales>(s4, scale_ctrl);
    }
    for (int t = 0; t < M; ++t) {
      const bf16* x = xp + t * ldxp + i;
      const __m512i x0 = _mm512_load_si512(x), x1 = _mm512_load_si512(x + 32);
      const __m512i x2 = _mm512_load_si512(x + 64), x3 = _mm512_load_si512(x + 96);
      for (int r = 0; r < R; ++r) {
        acc[r][t] = Dot4Scaled<M>(acc[r][t], x0, x1, x2, x3, v[r], sv[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) AddSums<M>(acc[r], y + r, ldy, add);
}

// Rows processed together (sharing x loads) for M tokens. On LLC-resident weights 2-4 rows made
// MXFP4 m = 1 10-15% faster, but from DRAM (one Zen 4 core) interleaving 2-4 row streams cut it
// from ~20 to ~10 GB/s, so one row at a time.
template <int M>
constexpr int Fp8Rows() {
  return 1;
}
template <int M>
constexpr int Mxfp4Rows() {
  return 1;
}

// Calls Fn<M>::Run(args...) with M = n (1..8).
template <template <int> class Fn, typename... Args>
inline void WithBatch(size_t n, Args&&... args) {
  switch (n) {
    case 1:
      return Fn<1>::Run(args...);
    case 2:
      return Fn<2>::Run(args...);
    case 3:
      return Fn<3>::Run(args...);
    case 4:
      return Fn<4>::Run(args...);
    case 5:
      return Fn<5>::Run(args...);
    case 6:
      return Fn<6>::Run(args...);
    case 7:
      return Fn<7>::Run(args...);
    default:
      return Fn<8>::Run(args...);
  }
}

// The rows of a range over panel [c0, c0 + kc) for a batch of M tokens: R rows at a time, then
// one at a time.
template <int M>
struct Fp8Panel {
  template <int R>
  static void Rows(const bf16* xp, size_t ldxp, const QuantRows& w, size_t r, size_t c0, size_t kc,
                   __m512i table, float* y, size_t ldy, bool add) {
    const float* scales = static_cast<const float*>(w.scales);
    const float* srow[R];
    for (int j = 0; j < R; ++j) srow[j] = scales + ((w.row0 + r + j) / kFp8Block) * w.scale_stride;
    Fp8PanelDot<M, R>(xp, ldxp, w.codes + r * w.row_stride + c0, w.row_stride, srow, w.col0 + c0,
                      kc, table, y + r, ldy, add);
  }
  static void Run(const bf16* xp, size_t ldxp, const QuantRows& w, size_t c0, size_t kc,
                  __m512i table, float* y, size_t ldy, bool add) {
    constexpr int R = Fp8Rows<M>();
    size_t r = 0;
    for (; r + R <= w.rows; r += R) Rows<R>(xp, ldxp, w, r, c0, kc, table, y, ldy, add);
    for (; r < w.rows; ++r) Rows<1>(xp, ldxp, w, r, c0, kc, table, y, ldy, add);
  }
};

template <int M>
struct Mxfp4Panel {
  template <int R>
  static void Rows(const bf16* xp, size_t ldxp, const QuantRows& w, size_t r, size_t c0, size_t kc,
                   __m512i table, __m512i ctrl, float* y, size_t ldy, bool add) {
    const uint8_t* codes = w.codes + r * w.row_stride + c0 / 2;
    const uint8_t* scales = static_cast<const uint8_t*>(w.scales) + r * w.scale_stride + c0 / 32;
    bool odd = false;
    for (int j = 0; j < R; ++j) odd |= HasOddScale(scales + j * w.scale_stride, kc / 32);
    if (odd)
      return Mxfp4PanelDot<M, R, true>(xp, ldxp, codes, w.row_stride, scales, w.scale_stride, kc,
                                       table, ctrl, y + r, ldy, add);
    Mxfp4PanelDot<M, R, false>(xp, ldxp, codes, w.row_stride, scales, w.scale_stride, kc, table,
                               ctrl, y + r, ldy, add);
  }
  static void Run(const bf16* xp, size_t ldxp, const QuantRows& w, size_t c0, size_t kc,
                  __m512i table, float* y, size_t ldy, bool add) {
    const __m512i ctrl = _mm512_loadu_si512(kScaleToLane);
    constexpr int R = Mxfp4Rows<M>();
    size_t r = 0;
    for (; r + R <= w.rows; r += R) Rows<R>(xp, ldxp, w, r, c0, kc, table, ctrl, y, ldy, add);
    for (; r < w.rows; ++r) Rows<1>(xp, ldxp, w, r, c0, kc, table, ctrl, y, ldy, add);
  }
};

// Batches of up to 8 tokens, panels of x permuted by `permute` (step: its column granularity).
template <template <int> class Panel>
void GemvPanels(const bf16* xb, size_t ldxb, size_t m, const QuantRows& w, float* y, size_t ldy,
                bool accumulate, __m512i table, void (*permute)(const bf16*, size_t, bf16*),
                size_t step) {
  alignas(64) bf16 xp[kXpElems];
  for (size_t t0 = 0; t0 < m; t0 += kMaxBatch) {
    const size_t nt = m - t0 < kMaxBatch ? m - t0 : kMaxBatch;
    const size_t panel = PanelCols(nt);
    for (size_t c0 = 0; c0 < w.k; c0 += panel) {
      const size_t kc = w.k - c0 < panel ? w.k - c0 : panel;
      const size_t ldxp = (kc + step - 1) / step * step;
      for (size_t t = 0; t < nt; ++t) permute(xb + (t0 + t) * ldxb + c0, kc, xp + t * ldxp);
      WithBatch<Panel>(nt, xp, ldxp, w, c0, kc, table, y + t0 * ldy, ldy, accumulate || c0 > 0);
    }
  }
}

// The codes of row `row` + kPanel (the same row of the next panel), to prefetch while decoding
// `row`; null past the view's rows.
inline const char* NextPanelCodes(const QuantRows& w, size_t row) {
  return row + kPanel < w.rows
             ? reinterpret_cast<const char*>(w.codes + (row + kPanel) * w.row_stride)
             : nullptr;
}

// Rows of a range decoded to bf16 into panel [nr][ld]; false if a scale does not fold (s ∉
// [2, 252]), in which case the caller takes the GEMV path.
// The next panel's codes are requested meanwhile, a line per 64 codes of each row.
bool DecodeMxfp4Panel(const QuantRows& w, size_t r0, size_t nr, bf16* panel, size_t ld,
                      __m512i lut) {
  for (size_t j = 0; j < nr; ++j) {
    const uint8_t* codes = w.codes + (r0 + j) * w.row_stride;
    const uint8_t* scales = static_cast<const uint8_t*>(w.scales) + (r0 + j) * w.scale_stride;
    const char* next = NextPanelCodes(w, r0 + j);
    for (size_t g = 0; g < w.k / 32; ++g) {
      if (next && g % 4 == 0) _mm_prefetch(next + g * 16, _MM_HINT_T1);
      if (!ScaleFoldsIntoBf16(scales[g])) return false;
      _mm512_storeu_si512(panel + j * ld + g * 32,
                          Mxfp4ToBf16(codes + g * 16, ExpAdd(scales[g]), lut));
    }
  }
  return true;
}

// FP8 GEMM tile: M ≤ 12 tokens × 32 rows over a packed panel (GemmBf16's layout). Within a
// 128-column scale block the dot products accumulate in registers exactly as in the bf16 GEMM; at
// the block's end they are multiplied by the block's per-row scales into a total per token, kept
// in L1 (2M zmm of accumulators leave no room for them at 12 tokens; against 6-token tiles with
// both sets in registers, on 32 cold experts at 128 / 512 tokens: 0.96-1.10x, median ~1.04x). Not
// the bf16 GEMM per block into a buffer scaled into y: that re-read and re-wrote y and the buffer
// once per block (38% of the bf16 peak at m = 512).
constexpr size_t kMaxFp8Blocks = 512;  // k up to 65536
constexpr int kFp8TileTokens = 12;

// x's bf16 rows [m, k] as the FP8 tile reads them: tiles of 12 tokens, in each the tokens' column
// pair p (x[t, 2p], x[t, 2p + 1] as one int32) at p · 12 + t; zero past m and k. Why: the tile's
// 12 broadcasts from 12 rows k · 2 bytes apart hit one L1 set when that is a multiple of 4 KiB
// (o_proj's k = 6144: 12 lines in a 12-way set, beside the weights' lines), and took 12 row
// pointers (GCC spilled two per step); packed, it is one sequential stream.
void PackFp8XTiles(const bf16* xb, size_t ldxb, size_t m, size_t k, uint32_t* xt) {
  const size_t pairs = (k + 1) / 2;
  for (size_t t0 = 0; t0 < m; t0 += kFp8TileTokens) {
    uint32_t* tile = xt + t0 * pairs;
    for (size_t p0 = 0; p0 < pairs; p0 += 16) {
      const size_t c0 = 2 * p0;
      const __mmask32 mask = TailMask32(k - c0);
      __m512i r[16];
      for (size_t i = 0; i < 16; ++i)
        r[i] = i < kFp8TileTokens && t0 + i < m
                   ? _mm512_maskz_loadu_epi16(mask, xb + (t0 + i) * ldxb + c0)
                   : _mm512_setzero_si512();
      Transpose16x16(r);
      const size_t n = pairs - p0 < 16 ? pairs - p0 : 16;
      for (size_t c = 0; c < n; ++c)
        _mm512_mask_storeu_epi32(tile + (p0 + c) * kFp8TileTokens,
                                 __mmask16((1u << kFp8TileTokens) - 1), r[c]);
    }
  }
}

// The next panel's codes (rows of `stride` bytes), requested into L2 by a panel's last token
// tiles, a share of the rows each: each block's two lines of those rows as the tile starts that
// block. Why then: requested while the panel was decoded (stop 25), they had to survive all its
// tiles in L2, and at 128 tokens the tiles' x rows (768 KiB) nearly fill it; in the last tile
// alone, too many at once. Cold-expert A/B against the decode-time requests, 2 threads, Zen 5:
// [1536, 3072] 1.06-1.16x at 128 tokens; in the last tile alone [3072, 1536] lost 2-5%.
struct NextCodes {
  const uint8_t* codes = nullptr;  // null: nothing to request
  size_t stride = 0, rows = 0;     // rows [0, rows) of the share
};

template <int M>
void Fp8GemmTile(const uint32_t* xt, const bf16* pack, const size_t* bounds, size_t blocks,
                 const float* scales, float* y, size_t ldy, size_t rows, bool accumulate,
                 const NextCodes& next) {
  // The scaled sums in memory (L1): with 2M block accumulators in registers, M = 12 leaves no
  // room for them; they are touched once per 128-column block.
  alignas(64) float total[M][2][16];
  for (int t = 0; t < M; ++t)
    for (int h = 0; h < 2; ++h) _mm512_store_ps(total[t][h], _mm512_setzero_ps());
  const __m512i* wp = reinterpret_cast<const __m512i*>(pack);
  for (size_t b = 0; b < blocks; ++b) {
    if (next.codes)
      for (size_t r = 0; r < next.rows; ++r) {
        const char* c = reinterpret_cast<const char*>(next.codes + r * next.stride + 2 * bounds[b]);
        _mm_prefetch(c, _MM_HINT_T1);
        _mm_prefetch(c + 64, _MM_HINT_T1);
      }
    __m512 acc[M][2];
    for (int t = 0; t < M; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
    for (size_t p = bounds[b]; p < bounds[b + 1]; ++p) {
      const __m512i w0 = _mm512_load_si512(wp + 2 * p), w1 = _mm512_load_si512(wp + 2 * p + 1);
      for (int t = 0; t < M; ++t) {
        const __m512i xv = _mm512_set1_epi32(static_cast<int>(xt[p * kFp8TileTokens + t]));
        acc[t][0] = _mm512_dpbf16_ps(acc[t][0], AsBh(xv), AsBh(w0));
        acc[t][1] = _mm512_dpbf16_ps(acc[t][1], AsBh(xv), AsBh(w1));
      }
    }
    const __m512 s0 = _mm512_loadu_ps(scales + b * kPanel);
    const __m512 s1 = _mm512_loadu_ps(scales + b * kPanel + 16);
    for (int t = 0; t < M; ++t) {
      _mm512_store_ps(total[t][0], _mm512_fmadd_ps(acc[t][0], s0, _mm512_load_ps(total[t][0])));
      _mm512_store_ps(total[t][1], _mm512_fmadd_ps(acc[t][1], s1, _mm512_load_ps(total[t][1])));
    }
  }
  const __mmask16 m0 = TailMask16(rows), m1 = TailMask16(rows > 16 ? rows - 16 : 0);
  for (int t = 0; t < M; ++t) {
    float* yt = y + t * ldy;
    __m512 v0 = _mm512_load_ps(total[t][0]), v1 = _mm512_load_ps(total[t][1]);
    if (accumulate) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, yt));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, yt + 16));
    }
    _mm512_mask_storeu_ps(yt, m0, v0);
    if (m1) _mm512_mask_storeu_ps(yt + 16, m1, v1);
  }
}

using Fp8TileFn = void (*)(const uint32_t*, const bf16*, const size_t*, size_t, const float*,
                           float*, size_t, size_t, bool, const NextCodes&);
constexpr Fp8TileFn kFp8Tiles[kFp8TileTokens] = {nullptr,        Fp8GemmTile<1>,  Fp8GemmTile<2>,
                                                 Fp8GemmTile<3>, Fp8GemmTile<4>,  Fp8GemmTile<5>,
                                                 Fp8GemmTile<6>, Fp8GemmTile<7>,  Fp8GemmTile<8>,
                                                 Fp8GemmTile<9>, Fp8GemmTile<10>, Fp8GemmTile<11>};

}  // namespace

void GemvFp8(const bf16* xb, size_t ldxb, size_t m, const QuantRows& w, float* y, size_t ldy,
             bool accumulate) {
  // The 64-code steps must not straddle a scale block: col0 % 64 == 0 (every real TP split).
  if (w.col0 % 64 != 0) return GemvFp8Unaligned(xb, ldxb, m, w, y, ldy, accumulate);
  GemvPanels<Fp8Panel>(xb, ldxb, m, w, y, ldy, accumulate, Table16(kFp8Hi), PermuteXFp8, 64);
}

void GemvMxfp4(const bf16* xb, size_t ldxb, size_t m, const QuantRows& w, float* y, size_t ldy,
               bool accumulate) {
  GemvPanels<Mxfp4Panel>(xb, ldxb, m, w, y, ldy, accumulate, _mm512_load_si512(kE2M1Bf16),
                         PermuteXMxfp4, 128);
}

void GemmMxfp4(const bf16* xb, size_t ldxb, size_t m, const QuantRows& w, float* y, size_t ldy,
               bool accumulate, bf16* panel, bf16* pack) {
  const __m512i lut = _mm512_load_si512(kE2M1Bf16);
  for (size_t n = 0; n < w.rows; n += kPanel) {
    const size_t nr = w.rows - n < kPanel ? w.rows - n : kPanel;
    if (DecodeMxfp4Panel(w, n, nr, panel, w.k, lut)) {
      GemmBf16(xb, ldxb, m, panel, w.k, w.k, nr, y + n, ldy, accumulate, pack);
    } else {
      QuantRows sub = w;
      sub.codes += n * w.row_stride;
      sub.scales = static_cast<const uint8_t*>(w.scales) + n * w.scale_stride;
      sub.rows = nr;
      GemvMxfp4(xb, ldxb, m, sub, y + n, ldy, accumulate);
    }
  }
}

void DecodeFp8Panel(const QuantRows& w, size_t r0, size_t nr, bf16* pack) {
  DecodeFp8Packed(w, r0, nr, pack, _mm512_load_si512(kE4M3Subnormal));
}

void DecodeFp8PanelPairs(const uint8_t* codes, size_t k, uint32_t* out) {
  // Column 2i's 16 codes then column 2i + 1's as 32 words; vpermw pairs row r's two.
  alignas(64) static constexpr uint16_t kInterleave[32] = {
      0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i sub_lut = _mm512_load_si512(kE4M3Subnormal);
  const __m512i index = _mm512_load_si512(kInterleave);
  const size_t full = k / 2, pairs = (k + 1) / 2, padded = (pairs + 15) / 16 * 16;
  for (size_t i = 0; i < pairs; ++i) {
    const __mmask32 mask = i < full ? ~__mmask32(0) : __mmask32(0xffff);  // odd k: one column
    const __m512i v = Fp8ToBf16(LoadFp8(codes + 32 * i, mask), sub_lut);
    _mm512_storeu_si512(out + 16 * i, _mm512_permutexvar_epi16(index, v));
  }
  for (size_t i = pairs; i < padded; ++i) _mm512_storeu_si512(out + 16 * i, _mm512_setzero_si512());
}

size_t Fp8XTileElems(size_t m, size_t k) {
  return (m + kFp8TileTokens - 1) / kFp8TileTokens * kFp8TileTokens * ((k + 1) / 2);
}

void GemmFp8(const bf16* xb, size_t ldxb, size_t m, const QuantRows& w, float* y, size_t ldy,
             bool accumulate, bf16* pack, float* scales, uint32_t* xt) {
  // The tile consumes x in (even, odd) pairs from the view's first column, so scale blocks must
  // start on even columns; an odd col0 (no real TP split produces one) takes the GEMV path.
  if (w.col0 % 2 != 0) return GemvFp8(xb, ldxb, m, w, y, ldy, accumulate);
  const __m512i sub_lut = _mm512_load_si512(kE4M3Subnormal);
  const float* block_scales = static_cast<const float*>(w.scales);
  // Block boundaries of the view in pairs: block b covers pairs [bounds[b], bounds[b + 1]).
  size_t bounds[kMaxFp8Blocks + 1];
  size_t blocks = 0;
  bounds[0] = 0;
  for (size_t a = 0; a < w.k; ++blocks) {
    MOESERVE_CHECK(blocks < kMaxFp8Blocks, "FP8 GEMM: k ", w.k, " has too many scale blocks");
    const size_t end = ((w.col0 + a) / kFp8Block + 1) * kFp8Block - w.col0;
    a = end < w.k ? end : w.k;
    bounds[blocks + 1] = (a + 1) / 2;
  }
  const size_t first_blk = w.col0 / kFp8Block, pairs = (w.k + 1) / 2;
  PackFp8XTiles(xb, ldxb, m, w.k, xt);
  for (size_t n = 0; n < w.rows; n += kPanel) {
    const size_t nr = w.rows - n < kPanel ? w.rows - n : kPanel;
    // Decode the panel's codes to bf16 (exact) straight into GemmBf16's packed layout: 16 rows
    // × 16 column pairs at a time, transposed in registers (a decode into bf16 rows and a
    // separate pack wrote and re-read the panel: ~10% of GemmFp8's samples at 128 tokens). Its
    // codes were requested by the previous panel's last tile (NextCodes).
    DecodeFp8Packed(w, n, nr, pack, sub_lut);
    // scales[b][j]: row n + j's scale in block b (0 beyond nr).
    for (size_t b = 0; b < blocks; ++b)
      for (size_t j = 0; j < kPanel; ++j)
        scales[b * kPanel + j] =
            j < nr ? block_scales[((w.row0 + n + j) / kFp8Block) * w.scale_stride + first_blk + b]
                   : 0.0f;
    // The last kRequestTiles token tiles request the next panel's rows, a share each.
    constexpr size_t kRequestTiles = 4;
    const size_t next_rows = n + kPanel >= w.rows           ? 0
                             : w.rows - n - kPanel < kPanel ? w.rows - n - kPanel
                                                            : kPanel;
    const size_t tiles = (m + kFp8TileTokens - 1) / kFp8TileTokens;
    const size_t first = tiles > kRequestTiles ? tiles - kRequestTiles : 0, sharing = tiles - first;
    for (size_t t = 0, tile = 0; t < m; t += kFp8TileTokens, ++tile) {
      const size_t tokens = m - t < kFp8TileTokens ? m - t : kFp8TileTokens;
      NextCodes req;
      if (next_rows && tile >= first) {
        const size_t r0 = next_rows * (tile - first) / sharing;
        const size_t r1 = next_rows * (tile - first + 1) / sharing;
        req = {w.codes + (n + kPanel + r0) * w.row_stride, w.row_stride, r1 - r0};
      }
      const uint32_t* xtile = xt + t * pairs;
      if (tokens == kFp8TileTokens)
        Fp8GemmTile<kFp8TileTokens>(xtile, pack, bounds, blocks, scales, y + t * ldy + n, ldy, nr,
                                    accumulate, req);
      else
        kFp8Tiles[tokens](xtile, pack, bounds, blocks, scales, y + t * ldy + n, ldy, nr, accumulate,
                          req);
    }
  }
}

}  // namespace moeserve::kernels::avx512bf16
