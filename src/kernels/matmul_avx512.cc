// AVX-512 f32 kernels that need no BF16 or VNNI instruction: the f32 GEMV / small GEMM (the MoE
// router and other f32 weights) and SiluMul. Built with the AVX-512 flags (no -mavx512bf16), so
// the avx512 table (AVX-512 with VNNI, no BF16: Cascade Lake, Ice Lake) and the avx512bf16 one
// both run them.
#include <immintrin.h>

#include <array>
#include <cstddef>

#include "kernels/internal.h"
#include "kernels/side_by_side.h"
#include "kernels/simd_math_avx512.h"

namespace moeserve::kernels::avx512 {
namespace {

// One token × R rows (row r at w[r], its sum into *y[r]): per row one accumulator, 16 columns a
// step, a masked last step, then the lanes' reduction.
template <int R>
inline void GemvF32Rows(const float* x, size_t k, const float* const w[R], float* const y[R],
                        bool accumulate) {
  __m512 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= k; i += 16) {
    const __m512 xv = _mm512_loadu_ps(x + i);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(xv, _mm512_loadu_ps(w[r] + i), acc[r]);
  }
  if (i < k) {
    const __mmask16 mask = TailMask16(k - i);
    const __m512 xv = _mm512_maskz_loadu_ps(mask, x + i);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(mask, w[r] + i), acc[r]);
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const float s = _mm512_reduce_add_ps(acc[r]);
    *y[r] = accumulate ? *y[r] + s : s;
  }
}

// R consecutive rows from w (row_stride apart) into y[0, R).
template <int R>
inline void GemvF32Block(const float* x, size_t k, const float* w, size_t row_stride, float* y,
                         bool accumulate) {
  const float* rows[R];
  float* ys[R];
  for (int r = 0; r < R; ++r) rows[r] = w + r * row_stride, ys[r] = y + r;
  GemvF32Rows<R>(x, k, rows, ys, accumulate);
}

// T tokens × 4 rows: each (token, row) accumulator takes exactly GemvF32Block's steps (the same
// lanes, the same order, the same reduction), so y does not depend on how many tokens share a
// tile; 4 weight and T x loads feed 4·T FMAs, where one token at a time fed 4 with 5 loads (the
// MoE router, 256 × 3072 f32, was ~3% of a 512-token prefill, Zen 4).
template <int T>
inline void GemmF32Tile(const float* x, size_t ldx, size_t k, const float* w, size_t row_stride,
                        float* y, size_t ldy, bool accumulate) {
  // Unrolled, the masked tail step out of the loop: with the mask computed in the loop GCC kept
  // a stack copy of all 24 accumulators, stored every step (store-bound: ~75 GFLOP/s, 2 threads).
  __m512 acc[T][4];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) acc[t][r] = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= k; i += 16) {
    __m512 wv[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) wv[r] = _mm512_loadu_ps(w + r * row_stride + i);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_loadu_ps(x + t * ldx + i);
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) acc[t][r] = _mm512_fmadd_ps(xv, wv[r], acc[t][r]);
    }
  }
  if (i < k) {  // the same masked step as GemvF32Block's last
    const __mmask16 mask = TailMask16(k - i);
    __m512 wv[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) wv[r] = _mm512_maskz_loadu_ps(mask, w + r * row_stride + i);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_maskz_loadu_ps(mask, x + t * ldx + i);
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) acc[t][r] = _mm512_fmadd_ps(xv, wv[r], acc[t][r]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const float s = _mm512_reduce_add_ps(acc[t][r]);
      y[t * ldy + r] = accumulate ? y[t * ldy + r] + s : s;
    }
}

}  // namespace

void GemvF32(const float* x, size_t ldx, size_t m, const float* w, size_t row_stride, size_t k,
             size_t rows, float* y, size_t ldy, bool accumulate) {
  // Tiles of 6 tokens × 4 rows, token blocks outermost (a block's x stays in L2 while the rows
  // pass; rows outermost measured within 3%). The router of a 512-token prefill, 2 threads,
  // Zen 4: 76 GFLOP/s one token at a time, 148-151 in these tiles.
  constexpr size_t kTokens = 6;
  size_t t = 0;
  for (; t + kTokens <= m; t += kTokens) {
    size_t r = 0;
    for (; r + 4 <= rows; r += 4)
      GemmF32Tile<kTokens>(x + t * ldx, ldx, k, w + r * row_stride, row_stride, y + t * ldy + r,
                           ldy, accumulate);
    for (; r < rows; ++r)
      for (size_t u = t; u < t + kTokens; ++u)
        GemvF32Block<1>(x + u * ldx, k, w + r * row_stride, row_stride, y + u * ldy + r,
                        accumulate);
  }
  if (t == m) return;
  if (m == 1) {
    // One token (decode): rows r and r + half side by side, each half of the rows read as one
    // sequential stream (the rows are contiguous), which the hardware prefetchers follow; four
    // consecutive rows side by side were four short streams restarting every 4 rows. The MoE
    // router's [256 x 3072] from DRAM, Zen 4, 2 threads, in-process A/B against a plain read of
    // the same bytes: 0.91x vs 0.73x in a fast host state (~60 GB/s), 0.93-0.99x vs 0.89-0.96x
    // in a slow one. The same bits (each row's steps are GemvF32Block's).
    const size_t done = ForEachSideBySide<2>(0, rows, [&](const std::array<size_t, 2>& r) {
      const float* ws[2] = {w + r[0] * row_stride, w + r[1] * row_stride};
      float* ys[2] = {y + r[0], y + r[1]};
      GemvF32Rows<2>(x, k, ws, ys, accumulate);
    });
    if (done < rows) GemvF32Block<1>(x, k, w + done * row_stride, row_stride, y + done, accumulate);
    return;
  }
  // 2-5 tokens: row blocks outermost so a block of W stays in L1 while every token passes over it.
  size_t r = 0;
  for (; r + 4 <= rows; r += 4)
    for (size_t u = t; u < m; ++u)
      GemvF32Block<4>(x + u * ldx, k, w + r * row_stride, row_stride, y + u * ldy + r, accumulate);
  for (; r < rows; ++r)
    for (size_t u = t; u < m; ++u)
      GemvF32Block<1>(x + u * ldx, k, w + r * row_stride, row_stride, y + u * ldy + r, accumulate);
}

void SiluMul(const float* gate, const float* up, float* out, size_t n) {
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 mask = TailMask16(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(mask, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(mask, up + i);
    const __m512 e = Exp(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 s = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    _mm512_mask_storeu_ps(out + i, mask, _mm512_mul_ps(s, u));
  }
}

}  // namespace moeserve::kernels::avx512
