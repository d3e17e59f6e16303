// Roofline probes with AVX-512 BF16 instructions (built with the AVX-512 BF16 flags).
#include <immintrin.h>

#include "kernels/internal.h"

namespace moeserve::kernels::avx512bf16 {

// 12 independent accumulators cover the instruction's latency × throughput on current cores.
void Bf16DotChains(size_t iterations, float* sink) {
  __m512 acc[12];
  for (int c = 0; c < 12; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80);  // bf16 pairs of 1.0
  const __m512bh b = (__m512bh)_mm512_set1_epi32(0x00010001);  // tiny: sums stay finite
  for (size_t i = 0; i < iterations; ++i) {
    for (int c = 0; c < 12; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  }
  __m512 s = acc[0];
  for (int c = 1; c < 12; ++c) s = _mm512_add_ps(s, acc[c]);
  *sink = _mm512_reduce_add_ps(s);
}

}  // namespace moeserve::kernels::avx512bf16
