// Roofline probes with AVX2 + FMA (for machines without AVX-512; built with the AVX2 flags).
#include <immintrin.h>

#include "kernels/internal.h"
#include "kernels/simd_math_avx2.h"

namespace moeserve::kernels::avx2 {

double SumBuffer(const float* data, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(data + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(data + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(data + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(data + i + 24));
  }
  double s = HorizontalSum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; ++i) s += data[i];
  return s;
}

void F32FmaChains(size_t iterations, float* sink) {
  __m256 acc[12];
  for (int c = 0; c < 12; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-3f);
  for (size_t i = 0; i < iterations; ++i) {
    for (int c = 0; c < 12; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  }
  __m256 s = acc[0];
  for (int c = 1; c < 12; ++c) s = _mm256_add_ps(s, acc[c]);
  *sink = HorizontalSum(s);
}

void Int8DotChains(size_t iterations, int32_t* sink) {
  // As the MXFP4 kernel's inner step: vpmaddubsw into int16 sums (wrapping is harmless here).
  __m256i acc[12];
  for (int c = 0; c < 12; ++c) acc[c] = _mm256_set1_epi16(static_cast<int16_t>(c));
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-1);
  for (size_t i = 0; i < iterations; ++i) {
    for (int c = 0; c < 12; ++c) acc[c] = _mm256_add_epi16(acc[c], _mm256_maddubs_epi16(a, b));
  }
  __m256i s = acc[0];
  for (int c = 1; c < 12; ++c) s = _mm256_add_epi16(s, acc[c]);
  *sink = _mm256_extract_epi16(s, 0);
}

}  // namespace moeserve::kernels::avx2
