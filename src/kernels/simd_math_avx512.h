// Vector math for the AVX-512 translation units only (include after <immintrin.h>, in a TU built
// with -mavx512f). static inline: every TU gets its own copy, compiled with its own flags.
#pragma once

#include <immintrin.h>

namespace moeserve::kernels {

// e^x, |relative error| < 2e-7 over the f32 range (Cephes polynomial on x − n·ln2, scaled by
// 2^n with vscalefps, which also gives 0 / inf at the ends without extra compares).
static inline __m512 Exp(__m512 x) {
  x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.7f)), _mm512_set1_ps(-104.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

// Lanes [0, n) set, n <= 16.
static inline __mmask16 TailMask16(size_t n) {
  return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
}
static inline __mmask32 TailMask32(size_t n) {
  return n >= 32 ? __mmask32(0xffffffffu) : __mmask32((1u << n) - 1);
}

}  // namespace moeserve::kernels
