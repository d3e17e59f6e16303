// Column pairs of bf16 panels (bf16_panels.h) and of f32 x rows, as the vdpbf16ps kernels and the
// AMX tile kernels both take them: 32-bit lanes holding (v[2i], v[2i + 1]). Include only from TUs
// built with the AVX-512 flags (as transpose_avx512.h).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/bf16_panels.h"

namespace moeserve::kernels::avx512bf16 {

// Columns 2i, 2i + 1 of a panel as 16 row pairs (lane r: W[r, 2i] | W[r, 2i + 1] << 16): the
// panel's own 64 bytes (a column past k is zero there).
inline __m512i LoadPairs(const bf16* panel, size_t i) {
  return _mm512_loadu_si512(panel + 2 * i * kBf16PanelRows);
}

// The top halves of 16 f32 rounded to bf16 exactly as F32ToBf16 (round to nearest even; NaNs keep
// their top half, made quiet); the low halves are garbage, only the top ones are read.
inline __m512i RoundToBf16Bits(__m512i u) {
  const __m512i r = _mm512_add_epi32(
      u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                          _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1))));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x400000));
}

// Pairs i0 .. i0 + 15 of row xr (k values; zero past k) rounded to bf16, as 16 uint32: x[2i] in
// the low half.
inline __m512i RowPairs(const float* xr, size_t k, size_t i0) {
  // The odd words (top halves) of the 32 values, in order.
  alignas(64) static constexpr uint16_t kTops[32] = {1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21,
                                                     23, 25, 27, 29, 31, 33, 35, 37, 39, 41, 43,
                                                     45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
  const size_t c0 = 2 * i0, left = k - c0;
  const __mmask16 m0 = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
  const __mmask16 m1 = left >= 32   ? __mmask16(0xffff)
                       : left <= 16 ? __mmask16(0)
                                    : __mmask16((1u << (left - 16)) - 1);
  const __m512i a = RoundToBf16Bits(_mm512_maskz_loadu_epi32(m0, xr + c0));
  const __m512i b = RoundToBf16Bits(_mm512_maskz_loadu_epi32(m1, xr + c0 + 16));
  // Masked-off values load as +0, whose rounding is +0: the padding stays zero.
  return _mm512_permutex2var_epi16(a, _mm512_load_si512(kTops), b);
}

}  // namespace moeserve::kernels::avx512bf16
