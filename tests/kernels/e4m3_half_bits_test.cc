// The FP8 kernels' shared e4m3 decode (kernels/e4m3_half_bits.h) on every code: the byte-shuffle
// decode from memory equals the widening one lane for lane, and both give value · 2^-8 exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/quant.h"
#include "runtime/cpu_features.h"

// The header's helpers are static inline AVX2 / F16C code: compiled here with those flags only.
#pragma GCC push_options
#pragma GCC target("avx2,f16c")
#include "kernels/e4m3_half_bits.h"

namespace moeserve::kernels {
namespace {

// Codes [c0, c0 + 16) decoded three ways, as f32: out[0] by E4m3HalfBits16 on a register,
// out[1] by E4m3HalfBits16At, out[2] by E4m3HalfBits8At on each half.
void DecodeThreeWays(const uint8_t* codes, float out[3][16]) {
  const __m256i a = E4m3HalfBits16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
  const __m256i b = E4m3HalfBits16At(codes);
  _mm256_storeu_ps(out[0], _mm256_cvtph_ps(_mm256_castsi256_si128(a)));
  _mm256_storeu_ps(out[0] + 8, _mm256_cvtph_ps(_mm256_extracti128_si256(a, 1)));
  _mm256_storeu_ps(out[1], _mm256_cvtph_ps(_mm256_castsi256_si128(b)));
  _mm256_storeu_ps(out[1] + 8, _mm256_cvtph_ps(_mm256_extracti128_si256(b, 1)));
  _mm256_storeu_ps(out[2], _mm256_cvtph_ps(E4m3HalfBits8At(codes)));
  _mm256_storeu_ps(out[2] + 8, _mm256_cvtph_ps(E4m3HalfBits8At(codes + 8)));
}
#pragma GCC pop_options

TEST(E4m3HalfBits, EveryCodeEveryRouteExact) {
  const CpuFeatures& cpu = GetCpuFeatures();
  if (!cpu.avx2 || !cpu.f16c) GTEST_SKIP() << "needs AVX2 and F16C";
  uint8_t codes[256 + 16];
  for (int c = 0; c < 256; ++c) codes[c] = static_cast<uint8_t>(c);
  for (int c0 = 0; c0 < 256; c0 += 16) {
    float out[3][16];
    DecodeThreeWays(codes + c0, out);
    for (int i = 0; i < 16; ++i) {
      const int c = c0 + i;
      EXPECT_EQ(std::memcmp(&out[0][i], &out[1][i], 4), 0) << "16 at " << c;
      EXPECT_EQ(std::memcmp(&out[0][i], &out[2][i], 4), 0) << "8 at " << c;
      // NaN codes (S.1111.111) have no fp16 image here; the kernels never meet them in weights.
      if ((c & 0x7f) == 0x7f) continue;
      EXPECT_EQ(out[1][i] * 256.0f, E4M3ToFloat(static_cast<uint8_t>(c))) << c;
      EXPECT_EQ(std::signbit(out[1][i]), (c & 0x80) != 0) << c;
    }
  }
}

}  // namespace
}  // namespace moeserve::kernels
