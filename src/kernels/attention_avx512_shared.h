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

// e4m3 codes -> exact values, without a multiplication whose input is an f32 subnormal: on Intel
// cores that takes a microcode assist (~100 cycles for a vector holding one, against ~3), and an
// FP8 row's small values are e4m3 subnormal codes (bench_attention --outlier-channels, K and V
// rows with real models' outlier channels: FP8 decode 0.21 -> 0.26 ms with the earlier
// "code bits at the top of an f32, × 2^120"). Instead each code becomes fp16 bits of value · 2^-8
// (its sign at bit 15, exponent and mantissa at fp16's places; subnormal codes become fp16
// subnormals), which vcvtph2ps converts exactly; × 256 (or a scale · 256) restores the value.

// 16 codes (the bytes of c) -> fp16 bits of value · 2^-8: shifted to the top of a 16-bit lane and
// back one place arithmetically, the copy of the sign at bit 14 cleared.
static inline __m256i E4m3ToHalfBits(__m128i c) {
  const __m256i w = _mm256_slli_epi16(_mm256_cvtepu8_epi16(c), 8);
  return _mm256_and_si256(_mm256_srai_epi16(w, 1), _mm256_set1_epi16(static_cast<short>(0xBFFF)));
}

// 16 codes -> value · 2^-8 as f32 (exact).
static inline __m512 E4m3ToF32Over256(__m128i c) {
  return _mm512_cvtph_ps(E4m3ToHalfBits(c));
}

}  // namespace moeserve::kernels
