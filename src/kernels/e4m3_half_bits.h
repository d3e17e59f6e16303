// e4m3 codes as the fp16 bits of value · 2^-8, the one decode the FP8 kernels share (include from
// TUs built with AVX2 / F16C or wider; static inline: every TU compiles its own copy with its own
// flags).
//
// Why: vcvtph2ps then gives the exact value · 2^-8 as f32, subnormal codes included (they become
// fp16 subnormals, which the conversion takes at full speed). The other exact route, the code's
// bits at the top of an f32 (value · 2^-120) times 2^120, multiplies an f32 subnormal for every
// subnormal code, and on Intel cores a vector holding one takes a microcode assist (~100 cycles
// against ~3; an FP8 row's or block's small values are subnormal codes).
//
// How: a code shifted to the top of a 16-bit lane has its sign at bit 15 and exponent / mantissa
// at 14..8; an arithmetic shift by one moves them to fp16's places (13..7) and copies the sign
// into bit 14, which the mask clears.
#pragma once

#include <immintrin.h>

namespace moeserve::kernels {

// 8 codes (the low 8 bytes of c) -> 8 fp16 lanes.
static inline __m128i E4m3HalfBits8(__m128i c) {
  const __m128i w = _mm_slli_epi16(_mm_cvtepu8_epi16(c), 8);
  return _mm_and_si128(_mm_srai_epi16(w, 1), _mm_set1_epi16(static_cast<short>(0xBFFF)));
}

// 16 codes (the bytes of c) -> 16 fp16 lanes.
static inline __m256i E4m3HalfBits16(__m128i c) {
  const __m256i w = _mm256_slli_epi16(_mm256_cvtepu8_epi16(c), 8);
  return _mm256_and_si256(_mm256_srai_epi16(w, 1), _mm256_set1_epi16(static_cast<short>(0xBFFF)));
}

}  // namespace moeserve::kernels
