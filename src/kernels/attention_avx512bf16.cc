// Attention tile with AVX-512 vector primitives (built with the AVX-512 BF16 flags).
#include <immintrin.h>

#include <cmath>

#include "kernels/internal.h"
#include "kernels/simd_math_avx512.h"

namespace moeserve::kernels::avx512bf16 {
namespace {

float Dot(const float* a, const float* b, size_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = TailMask16(n - i);
    s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

void Axpy(float alpha, const float* x, float* y, size_t n) {
  const __m512 va = _mm512_set1_ps(alpha);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask16(n - i);
    _mm512_mask_storeu_ps(
        y + i, m,
        _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

void Scale(float* y, float s, size_t n) {
  const __m512 vs = _mm512_set1_ps(s);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask16(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(vs, _mm512_maskz_loadu_ps(m, y + i)));
  }
}

void Widen(const bf16* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask16(n - i);
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, src + i));
    _mm512_mask_storeu_ps(dst + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
  }
}

// e4m3 → f32 exactly: the code's 7 magnitude bits at the top of an f32's exponent/mantissa
// are value · 2^-120 (subnormal codes become f32 subnormals, also exact); × 2^120 restores it.
void WidenFp8(const uint8_t* src, float scale, float* dst, size_t n) {
  const __m512 vs = _mm512_set1_ps(0x1p120f);
  const __m512 s = _mm512_set1_ps(scale);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask16(n - i);
    const __m512i c = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, src + i));
    const __m512i bits =
        _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(c, _mm512_set1_epi32(0x7f)), 20),
                        _mm512_slli_epi32(_mm512_and_si512(c, _mm512_set1_epi32(0x80)), 24));
    _mm512_mask_storeu_ps(dst + i, m,
                          _mm512_mul_ps(_mm512_mul_ps(_mm512_castsi512_ps(bits), vs), s));
  }
}

#include "kernels/attention_tile.h"

}  // namespace

void AttentionTile(const AttentionTileArgs& args) {
  AttentionTileImpl(args);
}

}  // namespace moeserve::kernels::avx512bf16
