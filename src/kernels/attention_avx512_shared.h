// The AVX-512 attention tile's FP8 decode (attention_avx512.cc; the AMX tile decodes rows by
// the byte tables of fp8_bytes_to_bf16_avx512.h instead), and PrefetchKvRows through
// attention_prefetch.h: include after <immintrin.h> and kernels/internal.h, in a TU built with
// -mavx512f. static inline: every TU gets its own copy, compiled with its own flags.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/attention_prefetch.h"
#include "kernels/e4m3_half_bits.h"
#include "kernels/internal.h"

namespace moeserve::kernels {

// 16 e4m3 codes -> value · 2^-8 as f32, exact (e4m3_half_bits.h; × 256, or a scale · 256,
// restores the value). Through fp16 bits, not an f32 subnormal times 2^120: bench_attention
// --outlier-channels (K and V rows with real models' outlier channels) decoded FP8 in 0.26 ms
// that way, 0.21 without subnormal codes.
static inline __m512 E4m3ToF32Over256(__m128i c) {
  return _mm512_cvtph_ps(E4m3HalfBits16(c));
}

}  // namespace moeserve::kernels
