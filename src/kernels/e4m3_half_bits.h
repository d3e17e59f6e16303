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

#include <cstdint>

namespace moeserve::kernels {

// 16 codes (the bytes of c) -> 16 fp16 lanes.
static inline __m256i E4m3HalfBits16(__m128i c) {
  const __m256i w = _mm256_slli_epi16(_mm256_cvtepu8_epi16(c), 8);
  return _mm256_and_si256(_mm256_srai_epi16(w, 1), _mm256_set1_epi16(static_cast<short>(0xBFFF)));
}

// The same from codes in memory, one vector op fewer: the load broadcasts the 16 bytes to both
// 128-bit lanes and one in-lane byte shuffle puts each code at the top of its 16-bit lane (codes
// 0-7 in the low lane, 8-15 in the high), where widening and a shift took two ops. Why: the AVX2
// FP8 GEMV decodes every weight this way and is bound by its vector ops on Intel's three ports.
// One core (Ice Lake), [3072 x 1536] from DRAM at 1 token: 11.1 -> 12.4 GB/s.
static inline __m256i E4m3HalfBits16At(const uint8_t* codes) {
  const __m256i both =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
  const __m256i top =
      _mm256_setr_epi8(-1, 0, -1, 1, -1, 2, -1, 3, -1, 4, -1, 5, -1, 6, -1, 7,  //
                       -1, 8, -1, 9, -1, 10, -1, 11, -1, 12, -1, 13, -1, 14, -1, 15);
  const __m256i w = _mm256_shuffle_epi8(both, top);
  return _mm256_and_si256(_mm256_srai_epi16(w, 1), _mm256_set1_epi16(static_cast<short>(0xBFFF)));
}

// vcvtph2ps reading its 8 fp16 values from memory (`p`, 16 bytes). Why: the register form is two
// uops on Intel, one of them on the shuffle port, and taking the upper half of a ymm costs an
// extract there too; the memory form's second uop is a load. The compiler turns a store and a
// reload into the register form, hence the asm.
static inline __m256 CvtPhPsFromMemory(const void* p) {
  __m256 r;
  asm("vcvtph2ps %1, %0" : "=x"(r) : "m"(*static_cast<const __m128i*>(p)));
  return r;
}

// 8 codes in memory -> 8 fp16 lanes, by the same byte shuffle.
static inline __m128i E4m3HalfBits8At(const uint8_t* codes) {
  const __m128i c = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes));
  const __m128i w =
      _mm_shuffle_epi8(c, _mm_setr_epi8(-1, 0, -1, 1, -1, 2, -1, 3, -1, 4, -1, 5, -1, 6, -1, 7));
  return _mm_and_si128(_mm_srai_epi16(w, 1), _mm_set1_epi16(static_cast<short>(0xBFFF)));
}

}  // namespace moeserve::kernels
