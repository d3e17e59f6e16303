// Vector math for the AVX2 translation units only (include in a TU built with -mavx2 -mfma).
#pragma once

#include <immintrin.h>

#include <cstddef>

namespace moeserve::kernels::avx2 {

// e^x, same polynomial as the AVX-512 Exp; 2^n built in the exponent field (n clamped so that it
// stays a normal number; inputs below -87.3 give a tiny normal instead of a denormal or 0).
static inline __m256 Exp(__m256 x) {
  x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.3f)), _mm256_set1_ps(-87.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// bf16 × 8 -> f32 × 8 (exact: a bf16 is the top half of an f32).
static inline __m256 LoadBf16(const void* p) {
  const __m128i v = _mm_loadu_si128(static_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
}

// y[0, min(n, 8)) as a vector, the lanes past n zero.
static inline __m256 LoadMasked(const float* y, size_t n) {
  if (n >= 8) return _mm256_loadu_ps(y);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_maskload_ps(y, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lane));
}

// Lanes [0, n) of v to y (n may exceed 8). Masked moves, not a stack temporary: a temporary made
// GCC keep the whole accumulator tile in memory inside the k loop.
// Whole vectors take plain moves: a masked store is microcoded on Zen and cost ~15% of a GEMM
// that streams partial sums through y.
static inline void StoreMasked(float* y, __m256 v, size_t n, bool accumulate) {
  if (n >= 8) {
    if (accumulate) v = _mm256_add_ps(v, _mm256_loadu_ps(y));
    _mm256_storeu_ps(y, v);
    return;
  }
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lane);
  if (accumulate) v = _mm256_add_ps(v, _mm256_maskload_ps(y, mask));
  _mm256_maskstore_ps(y, mask, v);
}

}  // namespace moeserve::kernels::avx2
