// Roofline probes with AVX-512 F / VNNI instructions (built with the AVX-512 flags, no BF16): the
// streaming read, f32 FMA and int8 dot chains of the avx512 and avx512bf16 tables.
#include <immintrin.h>

#include "kernels/internal.h"

namespace moeserve::kernels::avx512 {

double SumBuffer(const float* data, size_t n) {
  // Four independent accumulators so the adds never limit the loads.
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_load_ps(data + i));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(data + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(data + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(data + i + 48));
  }
  double s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  for (; i < n; ++i) s += data[i];
  return s;
}

// 12 independent accumulators cover each instruction's latency × throughput on current cores.
void Int8DotChains(size_t iterations, int32_t* sink) {
  __m512i acc[12];
  for (int c = 0; c < 12; ++c) acc[c] = _mm512_set1_epi32(c);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-1);
  for (size_t i = 0; i < iterations; ++i) {
    for (int c = 0; c < 12; ++c) acc[c] = _mm512_dpbusd_epi32(acc[c], a, b);
  }
  __m512i s = acc[0];
  for (int c = 1; c < 12; ++c) s = _mm512_add_epi32(s, acc[c]);
  *sink = _mm512_reduce_add_epi32(s);
}

void F32FmaChains(size_t iterations, float* sink) {
  __m512 acc[12];
  for (int c = 0; c < 12; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-3f);
  for (size_t i = 0; i < iterations; ++i) {
    for (int c = 0; c < 12; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  }
  __m512 s = acc[0];
  for (int c = 1; c < 12; ++c) s = _mm512_add_ps(s, acc[c]);
  *sink = _mm512_reduce_add_ps(s);
}

}  // namespace moeserve::kernels::avx512
