// AVX2 decoders of quantized weight rows to exact f32 (built with the AVX2 flags). The AVX2 path
// has no bf16 dot instruction, so it multiplies in f32 anyway: a row dequantized into L1 costs one
// extra pass over cache-resident data, and equals DequantizeRow bit for bit (e4m3 · scale is the
// same single f32 multiplication; e2m1 · 2^k is exact).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/e4m3_half_bits.h"
#include "kernels/internal.h"

namespace moeserve::kernels::avx2 {
namespace {

constexpr size_t kFp8Block = 128;

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// e4m3 code → f32 exactly: the code's exponent and mantissa bits placed at the top of an f32
// mantissa/exponent give value · 2^-120 (subnormal codes become f32 subnormals, also exact), so
// one multiplication by 2^120 finishes the job. Needs denormals-are-zero off (the default).
inline float E4M3Scalar(uint8_t c) {
  const uint32_t u = (uint32_t{c & 0x7fu} << 20) | (uint32_t{c & 0x80u} << 24);
  return BitsToFloat(u) * 0x1p120f;
}

// 8 codes at once through fp16 bits (e4m3_half_bits.h: no f32 subnormal multiplied), · 256.
inline __m256 E4M3x8(const uint8_t* p) {
  const __m128i h = E4m3HalfBits8At(p);
  return _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
}

inline float E8M0Scalar(uint8_t e) {
  if (e == 255) return __builtin_nanf("");
  return e == 0 ? BitsToFloat(0x00400000u) : BitsToFloat(uint32_t{e} << 23);
}

}  // namespace

void DecodeFp8Row(const QuantRows& w, size_t r, float* out) {
  const uint8_t* codes = w.codes + r * w.row_stride;
  const float* scales =
      static_cast<const float*>(w.scales) + ((w.row0 + r) / kFp8Block) * w.scale_stride;
  size_t a = 0;
  while (a < w.k) {
    // [a, b): the columns of one 128-column scale block.
    const size_t blk = (w.col0 + a) / kFp8Block;
    const size_t end = (blk + 1) * kFp8Block - w.col0;
    const size_t b = end < w.k ? end : w.k;
    const float s = scales[blk];
    const __m256 vs = _mm256_set1_ps(s);
    size_t i = a;
    for (; i + 8 <= b; i += 8) _mm256_storeu_ps(out + i, _mm256_mul_ps(E4M3x8(codes + i), vs));
    for (; i < b; ++i) out[i] = E4M3Scalar(codes[i]) * s;
    a = b;
  }
}

void DecodeMxfp4Row(const QuantRows& w, size_t r, float* out) {
  const uint8_t* codes = w.codes + r * w.row_stride;
  const uint8_t* scales = static_cast<const uint8_t*>(w.scales) + r * w.scale_stride;
  const __m256 magnitude = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
  // Lane j of 8 consecutive elements holds nibble j of a little-endian 32-bit load.
  const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  for (size_t g = 0; g < w.k / 32; ++g) {
    const __m256 vs = _mm256_set1_ps(E8M0Scalar(scales[g]));
    for (size_t q = 0; q < 4; ++q) {
      uint32_t word;
      std::memcpy(&word, codes + g * 16 + q * 4, 4);
      const __m256i nib =
          _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(word)), shifts),
                           _mm256_set1_epi32(0xf));
      const __m256 mag = _mm256_permutevar8x32_ps(magnitude, nib);  // uses the low 3 bits
      const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(nib, _mm256_set1_epi32(8)), 28);
      const __m256 v = _mm256_or_ps(mag, _mm256_castsi256_ps(sign));
      _mm256_storeu_ps(out + g * 32 + q * 8, _mm256_mul_ps(v, vs));
    }
  }
}

}  // namespace moeserve::kernels::avx2
