// In-register transposes shared by the AVX-512 translation units (include only from TUs built
// with AVX-512 flags; static inline: every TU gets its own copy, compiled with its own flags).
#pragma once

#include <immintrin.h>

namespace moeserve::kernels {

// In-register transpose of a 16 × 16 matrix of 32-bit elements (r[i] = row i; on return r[c] =
// column c): 32-bit interleave, 64-bit interleave, then a 4 × 4 transpose of 128-bit lanes.
__attribute__((always_inline)) static inline void Transpose16x16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // u[4i + j], lane L: column 4L + j of rows 4i .. 4i+3.
  for (int i = 0; i < 4; ++i) {
    u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i a = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88);
    const __m512i b = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xdd);
    const __m512i c = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
    const __m512i d = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xdd);
    r[0 * 4 + j] = _mm512_shuffle_i32x4(a, c, 0x88);
    r[2 * 4 + j] = _mm512_shuffle_i32x4(a, c, 0xdd);
    r[1 * 4 + j] = _mm512_shuffle_i32x4(b, d, 0x88);
    r[3 * 4 + j] = _mm512_shuffle_i32x4(b, d, 0xdd);
  }
}

}  // namespace moeserve::kernels
