// AVX-512 BF16 kernels on quantized weights (this TU is built with the AVX-512 BF16 flags).
//
// Both formats decode to bf16 EXACTLY, in registers, 32 weights at a time:
//  e4m3: the code's 7 magnitude bits shifted into a bf16's exponent/mantissa and the exponent
//        rebiased (+120); subnormal codes (exponent field 0, m · 2^-9) come from an 8-entry
//        table (vpermw), because vdpbf16ps treats bf16 subnormals as zero.
//  e2m1: a 16-entry table (vpermw) gives the bf16 of the code's value; the group's e8m0 scale
//        2^(s − 127) is added to the exponent field of the nonzero ones. Exact while the result
//        stays a normal bf16, i.e. for s in [2, 252]; groups outside take an exact slower path
//        (dot of the unscaled values, times the f32 scale).
// FP8's f32 block scale cannot be folded into bf16 exactly, so partial dot products are kept per
// 128-column scale block and multiplied by the block's scale (GEMV: in registers; GEMM: the bf16
// GEMM runs one block of columns at a time into a small buffer that is scaled into y).
// Against the reference (W dequantized in f32, running f32 sum) only the summation order and the
// rounding of e4m3 · scale differ: products x · w are exact in both.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/internal.h"
#include "kernels/simd_math_avx512.h"

namespace moeserve::kernels::avx512bf16 {
namespace {

constexpr size_t kFp8Block = 128;
constexpr size_t kPanel = 32;

// bf16 bits of m · 2^-9 (the e4m3 subnormals), m = 0..7; entries 8..31 unused.
alignas(64) const uint16_t kE4M3Subnormal[32] = {0x0000, 0x3B00, 0x3B80, 0x3BC0,
                                                 0x3C00, 0x3C20, 0x3C40, 0x3C60};
// bf16 bits of the 16 e2m1 values; entries 16..31 unused.
alignas(64) const uint16_t kE2M1Bf16[32] = {0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040,
                                            0x4080, 0x40C0, 0x8000, 0xBF00, 0xBF80, 0xBFC0,
                                            0xC000, 0xC040, 0xC080, 0xC0C0};

inline __m512bh AsBh(__m512i v) {
  return (__m512bh)v;
}

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float E8M0(uint8_t e) {
  if (e == 255) return __builtin_nanf("");
  return e == 0 ? BitsToFloat(0x00400000u) : BitsToFloat(uint32_t{e} << 23);
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

template <int M>
inline void Mxfp4Group(const bf16* xb, size_t ldxb, const uint8_t* codes, uint8_t s, size_t g,
                       __m512* acc, __m512i lut) {
  if (ScaleFoldsIntoBf16(s)) {
    const __m512i w = Mxfp4ToBf16(codes + g * 16, ExpAdd(s), lut);
    for (int t = 0; t < M; ++t)
      acc[t] = _mm512_dpbf16_ps(acc[t], AsBh(_mm512_loadu_si512(xb + t * ldxb + g * 32)), AsBh(w));
  } else {
    const __m512i w = Mxfp4ToBf16(codes + g * 16, _mm512_setzero_si512(), lut);
    const __m512 vs = _mm512_set1_ps(E8M0(s));
    for (int t = 0; t < M; ++t) {
      const __m512 p = _mm512_dpbf16_ps(_mm512_setzero_ps(),
                                        AsBh(_mm512_loadu_si512(xb + t * ldxb + g * 32)), AsBh(w));
      acc[t] = _mm512_fmadd_ps(p, vs, acc[t]);
    }
  }
}

template <int M>
void Mxfp4RowDot(const bf16* xb, size_t ldxb, const uint8_t* codes, const uint8_t* scales, size_t k,
                 float* y, size_t ldy, bool accumulate, __m512i lut) {
  __m512 acc0[M], acc1[M];
  for (int t = 0; t < M; ++t) acc0[t] = acc1[t] = _mm512_setzero_ps();
  const size_t groups = k / 32;
  // Chunks of up to 32 groups: their exponent increments computed and range-checked with a few
  // vector instructions, so the inner loop only broadcasts a 16-bit value from memory per group
  // (a scalar chain per group made the decode-bound single-core GEMV ~30% slower).
  alignas(64) int16_t exp_add[32];
  for (size_t c0 = 0; c0 < groups; c0 += 32) {
    const size_t n = groups - c0 < 32 ? groups - c0 : 32;
    const __mmask32 mask = TailMask32(n);
    const __m512i s = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(mask, scales + c0));
    const __mmask32 bad = _mm512_mask_cmpgt_epu16_mask(
        mask, _mm512_sub_epi16(s, _mm512_set1_epi16(2)), _mm512_set1_epi16(250));
    if (bad) {
      for (size_t g = c0; g < c0 + n; ++g)
        Mxfp4Group<M>(xb, ldxb, codes, scales[g], g, (g & 1) ? acc1 : acc0, lut);
      continue;
    }
    _mm512_store_si512(exp_add, _mm512_slli_epi16(_mm512_sub_epi16(s, _mm512_set1_epi16(127)), 7));
    size_t i = 0;
    for (; i + 2 <= n; i += 2) {
      const size_t g = c0 + i;
      const __m512i w0 = Mxfp4ToBf16(codes + g * 16, _mm512_set1_epi16(exp_add[i]), lut);
      const __m512i w1 = Mxfp4ToBf16(codes + g * 16 + 16, _mm512_set1_epi16(exp_add[i + 1]), lut);
      for (int t = 0; t < M; ++t) {
        acc0[t] =
            _mm512_dpbf16_ps(acc0[t], AsBh(_mm512_loadu_si512(xb + t * ldxb + g * 32)), AsBh(w0));
        acc1[t] = _mm512_dpbf16_ps(acc1[t], AsBh(_mm512_loadu_si512(xb + t * ldxb + g * 32 + 32)),
                                   AsBh(w1));
      }
    }
    if (i < n) {
      const size_t g = c0 + i;
      const __m512i w0 = Mxfp4ToBf16(codes + g * 16, _mm512_set1_epi16(exp_add[i]), lut);
      for (int t = 0; t < M; ++t)
        acc0[t] =
            _mm512_dpbf16_ps(acc0[t], AsBh(_mm512_loadu_si512(xb + t * ldxb + g * 32)), AsBh(w0));
    }
  }
  for (int t = 0; t < M; ++t) acc0[t] = _mm512_add_ps(acc0[t], acc1[t]);
  StoreSums<M>(acc0, y, ldy, accumulate);
}

// Rows of a range decoded to bf16 into panel [nr][ld]; false if a scale does not fold (s ∉
// [2, 252]), in which case the caller takes the GEMV path.
bool DecodeMxfp4Panel(const QuantRows& w, size_t r0, size_t nr, bf16* panel, size_t ld,
                      __m512i lut) {
  for (size_t j = 0; j < nr; ++j) {
    const uint8_t* codes = w.codes + (r0 + j) * w.row_stride;
    const uint8_t* scales = static_cast<const uint8_t*>(w.scales) + (r0 + j) * w.scale_stride;
    for (size_t g = 0; g < w.k / 32; ++g) {
      if (!ScaleFoldsIntoBf16(scales[g])) return false;
      _mm512_storeu_si512(panel + j * ld + g * 32,
                          Mxfp4ToBf16(codes + g * 16, ExpAdd(scales[g]), lut));
    }
  }
  return true;
}

}  // namespace

void GemvFp8(const bf16* xb, size_t ldxb, size_t m, const QuantRows& w, float* y, size_t ldy,
             bool accumulate) {
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

void GemvMxfp4(const bf16* xb, size_t ldxb, size_t m, const QuantRows& w, float* y, size_t ldy,
               bool accumulate) {
  const __m512i lut = _mm512_load_si512(kE2M1Bf16);
  for (size_t r = 0; r < w.rows; ++r) {
    const uint8_t* codes = w.codes + r * w.row_stride;
    const uint8_t* sc = static_cast<const uint8_t*>(w.scales) + r * w.scale_stride;
    size_t t = 0;
    for (; t + 4 <= m; t += 4)
      Mxfp4RowDot<4>(xb + t * ldxb, ldxb, codes, sc, w.k, y + t * ldy + r, ldy, accumulate, lut);
    const bf16* xt = xb + t * ldxb;
    float* yt = y + t * ldy + r;
    switch (m - t) {
      case 3:
        Mxfp4RowDot<3>(xt, ldxb, codes, sc, w.k, yt, ldy, accumulate, lut);
        break;
      case 2:
        Mxfp4RowDot<2>(xt, ldxb, codes, sc, w.k, yt, ldy, accumulate, lut);
        break;
      case 1:
        Mxfp4RowDot<1>(xt, ldxb, codes, sc, w.k, yt, ldy, accumulate, lut);
        break;
      default:
        break;
    }
  }
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

void GemmFp8(const bf16* xb, size_t ldxb, size_t m, const QuantRows& w, float* y, size_t ldy,
             bool accumulate, bf16* panel, bf16* pack, float* partial) {
  // The bf16 GEMM consumes x in (even, odd) pairs from the block's first column, so a block must
  // start on an even column; an odd col0 (no real TP split produces one) takes the GEMV path.
  if (w.col0 % 2 != 0) return GemvFp8(xb, ldxb, m, w, y, ldy, accumulate);
  const __m512i sub_lut = _mm512_load_si512(kE4M3Subnormal);
  const float* scales = static_cast<const float*>(w.scales);
  for (size_t n = 0; n < w.rows; n += kPanel) {
    const size_t nr = w.rows - n < kPanel ? w.rows - n : kPanel;
    for (size_t a = 0; a < w.k;) {
      const size_t blk = (w.col0 + a) / kFp8Block;
      const size_t end = (blk + 1) * kFp8Block - w.col0, b = end < w.k ? end : w.k;
      const size_t seg = b - a;
      for (size_t j = 0; j < nr; ++j) {
        const uint8_t* codes = w.codes + (n + j) * w.row_stride + a;
        for (size_t i = 0; i < seg; i += 32) {
          const __mmask32 mask = TailMask32(seg - i);
          _mm512_mask_storeu_epi16(panel + j * seg + i, mask,
                                   Fp8ToBf16(LoadFp8(codes + i, mask), sub_lut));
        }
      }
      GemmBf16(xb + a, ldxb, m, panel, seg, seg, nr, partial, kPanel, false, pack);
      // y[t, n + j] (+)= partial[t, j] · scale of (row n + j, this block).
      alignas(64) float s[kPanel] = {};
      for (size_t j = 0; j < nr; ++j)
        s[j] = scales[((w.row0 + n + j) / kFp8Block) * w.scale_stride + blk];
      const __m512 s0 = _mm512_load_ps(s), s1 = _mm512_load_ps(s + 16);
      const __mmask16 m0 = TailMask16(nr), m1 = TailMask16(nr > 16 ? nr - 16 : 0);
      const bool add = accumulate || a > 0;
      for (size_t t = 0; t < m; ++t) {
        float* yt = y + t * ldy + n;
        const float* pt = partial + t * kPanel;
        __m512 v0 = _mm512_mul_ps(_mm512_load_ps(pt), s0);
        __m512 v1 = _mm512_mul_ps(_mm512_load_ps(pt + 16), s1);
        if (add) {
          v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, yt));
          v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, yt + 16));
        }
        _mm512_mask_storeu_ps(yt, m0, v0);
        if (m1) _mm512_mask_storeu_ps(yt + 16, m1, v1);
      }
      a = b;
    }
  }
}

}  // namespace moeserve::kernels::avx512bf16
