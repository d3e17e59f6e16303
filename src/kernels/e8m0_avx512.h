// MXFP4 block scales (e8m0) as f32 vectors, for the AVX-512 and AMX translation units only
// (include after <immintrin.h>, in a TU built with -mavx512f). static inline: every TU gets its own
// copy, compiled with its own flags.
#pragma once

#include <immintrin.h>

namespace moeserve::kernels {

// 16 e8m0 bytes → 2^(e − 127) in f32, as E8M0ToFloat: e << 23 is the exact power for
// e = 1 .. 254; e = 0 gives +0, which max() lifts to 2^-127; e = 255 gives +inf, and f − f (0 for
// finite f, NaN for inf) turns that into NaN while adding +0 to every other value.
static inline __m512 E8m0ToF32x16(__m128i e) {
  const __m512 f = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu8_epi32(e), 23));
  return _mm512_add_ps(_mm512_max_ps(f, _mm512_set1_ps(0x1p-127f)), _mm512_sub_ps(f, f));
}

// The low 8 bytes of e, the same way (a ymm: one 8-row MXFP4 group's scales of a block).
static inline __m256 E8m0ToF32x8(__m128i e) {
  const __m256 f = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu8_epi32(e), 23));
  return _mm256_add_ps(_mm256_max_ps(f, _mm256_set1_ps(0x1p-127f)), _mm256_sub_ps(f, f));
}

}  // namespace moeserve::kernels
