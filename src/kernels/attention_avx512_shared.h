// Pieces the AVX-512 attention tile (attention_avx512bf16.cc) and the AMX one (attention_amx.cc)
// share (PrefetchKvRows through attention_prefetch.h): include after <immintrin.h> and
// kernels/internal.h, in a TU built with -mavx512f. static inline: every TU gets its own copy,
// compiled with its own flags.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/attention_prefetch.h"
#include "kernels/internal.h"

namespace moeserve::kernels {

// 16 e4m3 codes (one per dword of c) -> their exact f32 values: the code's 7 magnitude bits at
// the top of an f32's exponent and mantissa are value · 2^-120 (subnormal codes become f32
// subnormals, also exact), × 2^120 restores it; the sign bit moves to bit 31.
static inline __m512 E4m3ToF32(__m512i c) {
  const __m512i bits =
      _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(c, _mm512_set1_epi32(0x7f)), 20),
                      _mm512_slli_epi32(_mm512_and_si512(c, _mm512_set1_epi32(0x80)), 24));
  return _mm512_mul_ps(_mm512_castsi512_ps(bits), _mm512_set1_ps(0x1p120f));
}

}  // namespace moeserve::kernels
