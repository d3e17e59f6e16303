// Attention tile with AVX2 + FMA vector primitives (built with the AVX2 flags).
#include <immintrin.h>

#include <cmath>

#include "kernels/internal.h"
#include "kernels/simd_math_avx2.h"

namespace moeserve::kernels::avx2 {
namespace {

float Dot(const float* a, const float* b, size_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  const size_t n16 = n / 16 * 16, n8 = n / 8 * 8;
  for (size_t i = 0; i < n16; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  if (n8 > n16) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + n16), _mm256_loadu_ps(b + n16), s0);
  float s = HorizontalSum(_mm256_add_ps(s0, s1));
  for (size_t i = n8; i < n; ++i) s += a[i] * b[i];
  return s;
}

void Axpy(float alpha, const float* x, float* y, size_t n) {
  const __m256 va = _mm256_set1_ps(alpha);
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += alpha * x[i];
}

void Scale(float* y, float s, size_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(vs, _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] *= s;
}

void Widen(const bf16* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, LoadBf16(src + i));
  for (; i < n; ++i) {
    const uint32_t u = uint32_t{src[i].bits} << 16;
    __builtin_memcpy(dst + i, &u, 4);
  }
}

void WidenFp8(const uint8_t* src, float scale, float* dst, size_t n) {
  // As the AVX-512 version: code bits at the top of an f32, × 2^120, × scale (exact, then one
  // rounding, the same as F8E4M3ToF32(c) · scale).
  const __m256 p120 = _mm256_set1_ps(0x1p120f), s = _mm256_set1_ps(scale);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i c =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i)));
    const __m256i bits =
        _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(0x7f)), 20),
                        _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(0x80)), 24));
    _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_castsi256_ps(bits), p120), s));
  }
  for (; i < n; ++i) {
    const uint32_t u = (uint32_t{src[i] & 0x7fu} << 20) | (uint32_t{src[i] & 0x80u} << 24);
    float f;
    __builtin_memcpy(&f, &u, 4);
    dst[i] = f * 0x1p120f * scale;
  }
}

#include "kernels/attention_tile.h"

}  // namespace

void AttentionTile(const AttentionTileArgs& args) {
  AttentionTileImpl(args);
}

}  // namespace moeserve::kernels::avx2
