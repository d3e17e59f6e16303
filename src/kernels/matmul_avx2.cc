// AVX2 + FMA MatMul kernels (this TU only is built with -mavx2 -mfma -mf16c).
// Without a bf16 dot instruction, bf16 weights are widened to f32 (exact) and x is kept as f32
// holding bf16-rounded values, so each product is exact and only the f32 sums round, as in the
// reference. GEMV: lanes along k, R rows at a time. GEMM: a 16-row panel is widened once into
// [k][16] f32 and swept by a 6-token × 16-feature register tile (12 accumulators).
#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "kernels/internal.h"
#include "kernels/side_by_side.h"
#include "kernels/simd_math_avx2.h"

namespace moeserve::kernels::avx2 {
namespace {

constexpr size_t kPanel = 16;
constexpr size_t kTileTokens = kPackedXTile;

inline float Bf16Bits(uint16_t b) {
  const uint32_t u = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// One weight row · M tokens, rows read one at a time front to back (a single sequential stream
// is what the hardware prefetcher follows best); two accumulators per token.
template <int M>
inline void RowDot(const float* xr, size_t ldxr, const bf16* w, size_t k, float* y, size_t ldy,
                   bool accumulate) {
  __m256 acc0[M], acc1[M];
  for (int t = 0; t < M; ++t) acc0[t] = acc1[t] = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= k; i += 16) {
    const __m256 w0 = LoadBf16(w + i), w1 = LoadBf16(w + i + 8);
    for (int t = 0; t < M; ++t) {
      acc0[t] = _mm256_fmadd_ps(_mm256_loadu_ps(xr + t * ldxr + i), w0, acc0[t]);
      acc1[t] = _mm256_fmadd_ps(_mm256_loadu_ps(xr + t * ldxr + i + 8), w1, acc1[t]);
    }
  }
  if (i + 8 <= k) {
    const __m256 w0 = LoadBf16(w + i);
    for (int t = 0; t < M; ++t)
      acc0[t] = _mm256_fmadd_ps(_mm256_loadu_ps(xr + t * ldxr + i), w0, acc0[t]);
    i += 8;
  }
  for (int t = 0; t < M; ++t) {
    float s = HorizontalSum(_mm256_add_ps(acc0[t], acc1[t]));
    for (size_t j = i; j < k; ++j) s += xr[t * ldxr + j] * Bf16Bits(w[j].bits);
    float& out = y[t * ldy];
    out = accumulate ? out + s : s;
  }
}

inline float WidenElem(bf16 v) {
  return Bf16Bits(v.bits);
}
inline float WidenElem(float v) {
  return v;
}

// pack[i][j] = W[j][i] as f32, j < 16 (rows beyond `rows` are zero).
template <typename T>
void PackPanel(const T* w, size_t row_stride, size_t k, size_t rows, float* pack) {
  for (size_t j = 0; j < kPanel; ++j) {
    if (j >= rows) {
      for (size_t i = 0; i < k; ++i) pack[i * kPanel + j] = 0;
      continue;
    }
    const T* wr = w + j * row_stride;
    for (size_t i = 0; i < k; ++i) pack[i * kPanel + j] = WidenElem(wr[i]);
  }
}

// M tokens × 16 features over k; xp is a packed tile ([k][kTileTokens], see PackX), so the M
// broadcasts of a step come from one 24-byte run of a single sequential stream.
template <int M>
void GemmTile(const float* xp, const float* pack, size_t k, float* y, size_t ldy, size_t rows,
              bool accumulate) {
  __m256 acc[M][2];
#pragma GCC unroll 16
  for (int t = 0; t < M; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  for (size_t i = 0; i < k; ++i) {
    const __m256 w0 = _mm256_load_ps(pack + i * kPanel), w1 = _mm256_load_ps(pack + i * kPanel + 8);
#pragma GCC unroll 16
    for (int t = 0; t < M; ++t) {
      const __m256 xv = _mm256_broadcast_ss(xp + i * kTileTokens + t);
      acc[t][0] = _mm256_fmadd_ps(xv, w0, acc[t][0]);
      acc[t][1] = _mm256_fmadd_ps(xv, w1, acc[t][1]);
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < M; ++t) {
    StoreMasked(y + t * ldy, acc[t][0], rows, accumulate);
    if (rows > 8) StoreMasked(y + t * ldy + 8, acc[t][1], rows - 8, accumulate);
  }
}

using TileFn = void (*)(const float*, const float*, size_t, float*, size_t, size_t, bool);
constexpr TileFn kTiles[kTileTokens + 1] = {nullptr,     GemmTile<1>, GemmTile<2>, GemmTile<3>,
                                            GemmTile<4>, GemmTile<5>, GemmTile<6>};

// One token × R rows (row r at w[r], its sum into *y[r]): per row one accumulator, 8 columns a
// step, the horizontal sum, then the columns past the last multiple of 8.
template <int R>
inline void GemvF32Rows(const float* x, size_t k, const float* const w[R], float* const y[R],
                        bool accumulate) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const size_t k_full = k / 8 * 8;
  for (size_t i = 0; i < k_full; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w[r] + i), acc[r]);
  }
  for (int r = 0; r < R; ++r) {
    float s = HorizontalSum(acc[r]);
    for (size_t i = k_full; i < k; ++i) s += x[i] * w[r][i];
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

// T tokens × 4 rows, each (token, row) with exactly GemvF32Block<4>'s steps (so a token's y does
// not depend on the batch): 4 weight and T x loads per 4·T FMAs instead of 5 per 4. T = 2 fits
// AVX2's 16 registers (8 accumulators, 4 weights, x).
template <int T>
inline void GemmF32Tile(const float* x, size_t ldx, size_t k, const float* w, size_t row_stride,
                        float* y, size_t ldy, bool accumulate) {
  __m256 acc[T][4];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) acc[t][r] = _mm256_setzero_ps();
  const size_t k_full = k / 8 * 8;
  for (size_t i = 0; i < k_full; i += 8) {
    __m256 wv[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) wv[r] = _mm256_loadu_ps(w + r * row_stride + i);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_loadu_ps(x + t * ldx + i);
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) acc[t][r] = _mm256_fmadd_ps(xv, wv[r], acc[t][r]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      float s = HorizontalSum(acc[t][r]);
      for (size_t i = k_full; i < k; ++i) s += x[t * ldx + i] * w[r * row_stride + i];
      y[t * ldy + r] = accumulate ? y[t * ldy + r] + s : s;
    }
}

}  // namespace

void RoundRowsToBf16(const float* x, size_t ldx, size_t m, size_t k, float* out, size_t ldo) {
  const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i hi_mask = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  for (size_t t = 0; t < m; ++t) {
    const float* xt = x + t * ldx;
    float* ot = out + t * ldo;
    size_t i = 0;
    for (; i + 8 <= k; i += 8) {
      const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(xt + i));
      // Round to nearest even exactly as F32ToBf16; NaNs keep their top half, made quiet.
      __m256i r = _mm256_add_epi32(
          u, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
      r = _mm256_and_si256(r, hi_mask);
      const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
      const __m256i quiet =
          _mm256_or_si256(_mm256_and_si256(u, hi_mask), _mm256_set1_epi32(0x400000));
      r = _mm256_blendv_epi8(r, quiet, nan);
      _mm256_storeu_ps(ot + i, _mm256_castsi256_ps(r));
    }
    for (; i < k; ++i) {
      uint32_t u;
      std::memcpy(&u, xt + i, 4);
      uint32_t r = ((u & 0x7fffffffu) > 0x7f800000u)
                       ? ((u & 0xffff0000u) | 0x400000u)
                       : ((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
      std::memcpy(ot + i, &r, 4);
    }
    for (; i < ldo; ++i) ot[i] = 0.0f;
  }
}

void GemvBf16(const float* xr, size_t ldxr, size_t m, const bf16* w, size_t row_stride, size_t k,
              size_t rows, float* y, size_t ldy, bool accumulate) {
  // Rows outermost: each row comes from memory once and from L1 for every later token pair.
  for (size_t r = 0; r < rows; ++r) {
    const bf16* wr = w + r * row_stride;
    size_t t = 0;
    for (; t + 2 <= m; t += 2)
      RowDot<2>(xr + t * ldxr, ldxr, wr, k, y + t * ldy + r, ldy, accumulate);
    if (t < m) RowDot<1>(xr + t * ldxr, ldxr, wr, k, y + t * ldy + r, ldy, accumulate);
  }
}

size_t PackFloatsGemmBf16(size_t k) {
  return k * kPanel;
}

size_t PackedXFloats(size_t m, size_t k) {
  return (m + kTileTokens - 1) / kTileTokens * kTileTokens * k;
}

void PackXSlot(const float* xr, size_t k, float* slot) {
  if (xr)
    for (size_t i = 0; i < k; ++i) slot[i * kTileTokens] = xr[i];
  else
    for (size_t i = 0; i < k; ++i) slot[i * kTileTokens] = 0.0f;
}

void PackX(const float* xr, size_t ldxr, size_t m, size_t k, float* xp) {
  for (size_t t0 = 0; t0 < m; t0 += kTileTokens)
    for (size_t t = 0; t < kTileTokens; ++t)
      PackXSlot(t0 + t < m ? xr + (t0 + t) * ldxr : nullptr, k, xp + t0 * k + t);
}

namespace {
template <typename T>
void GemmPacked(const float* xp, size_t m, const T* w, size_t row_stride, size_t k, size_t rows,
                float* y, size_t ldy, bool accumulate, float* pack) {
  // Blocked over k: a [kKc, 16] f32 panel (16 KiB) stays in L1 while every token tile's [kKc, 6]
  // run of the packed x (6 KiB, contiguous) streams past it. Partial sums go through y.
  constexpr size_t kKc = 192;
  for (size_t k0 = 0; k0 < k; k0 += kKc) {
    const size_t kc = k - k0 < kKc ? k - k0 : kKc;
    const bool acc = accumulate || k0 > 0;
    for (size_t n = 0; n < rows; n += kPanel) {
      const size_t panel_rows = rows - n < kPanel ? rows - n : kPanel;
      PackPanel(w + n * row_stride + k0, row_stride, kc, panel_rows, pack);
      for (size_t t = 0; t < m; t += kTileTokens) {
        const size_t tokens = m - t < kTileTokens ? m - t : kTileTokens;
        kTiles[tokens](xp + t * k + k0 * kTileTokens, pack, kc, y + t * ldy + n, ldy, panel_rows,
                       acc);
      }
    }
  }
}

}  // namespace

void GemmBf16(const float* xp, size_t m, const bf16* w, size_t row_stride, size_t k, size_t rows,
              float* y, size_t ldy, bool accumulate, float* pack) {
  GemmPacked(xp, m, w, row_stride, k, rows, y, ldy, accumulate, pack);
}

void GemmF32(const float* xp, size_t m, const float* w, size_t row_stride, size_t k, size_t rows,
             float* y, size_t ldy, bool accumulate, float* pack) {
  GemmPacked(xp, m, w, row_stride, k, rows, y, ldy, accumulate, pack);
}

void GemvF32(const float* x, size_t ldx, size_t m, const float* w, size_t row_stride, size_t k,
             size_t rows, float* y, size_t ldy, bool accumulate) {
  if (m == 1) {
    // One token (decode): rows r, r + q, r + 2q, r + 3q side by side, each quarter of the rows
    // read as one sequential stream (the rows are contiguous), as the AVX-512 GEMV's halves
    // (four here: a row's chain takes 32 bytes per FMA latency); four consecutive rows side by
    // side were four short streams restarting every 4 rows. The MoE router's [256 x 3072] from
    // DRAM, Zen 4 (AVX2 path), 2 threads, in-process A/B against the read probe: 0.80x vs 0.66x
    // in a fast host state (~56 GB/s), 0.87-0.99x vs 0.85-0.96x in a slow one. The same bits.
    const size_t done = ForEachSideBySide<4>(0, rows, [&](const std::array<size_t, 4>& r) {
      const float* ws[4] = {w + r[0] * row_stride, w + r[1] * row_stride, w + r[2] * row_stride,
                            w + r[3] * row_stride};
      float* ys[4] = {y + r[0], y + r[1], y + r[2], y + r[3]};
      GemvF32Rows<4>(x, k, ws, ys, accumulate);
    });
    for (size_t r = done; r < rows; ++r)
      GemvF32Block<1>(x, k, w + r * row_stride, row_stride, y + r, accumulate);
    return;
  }
  constexpr size_t kTokens = 2;
  size_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    size_t t = 0;
    for (; t + kTokens <= m; t += kTokens)
      GemmF32Tile<kTokens>(x + t * ldx, ldx, k, w + r * row_stride, row_stride, y + t * ldy + r,
                           ldy, accumulate);
    for (; t < m; ++t)
      GemvF32Block<4>(x + t * ldx, k, w + r * row_stride, row_stride, y + t * ldy + r, accumulate);
  }
  for (; r < rows; ++r)
    for (size_t t = 0; t < m; ++t)
      GemvF32Block<1>(x + t * ldx, k, w + r * row_stride, row_stride, y + t * ldy + r, accumulate);
}

void SiluMul(const float* gate, const float* up, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i), u = _mm256_loadu_ps(up + i);
    const __m256 e = Exp(_mm256_sub_ps(_mm256_setzero_ps(), g));
    const __m256 s = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(s, u));
  }
  for (; i < n; ++i) {
    // Scalar tail through the same vector code path, one lane used.
    alignas(32) float g[8] = {gate[i]}, u[8] = {up[i]}, o[8];
    const __m256 gv = _mm256_load_ps(g);
    const __m256 e = Exp(_mm256_sub_ps(_mm256_setzero_ps(), gv));
    _mm256_store_ps(o, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(_mm256_set1_ps(1.0f), e)),
                                     _mm256_load_ps(u)));
    out[i] = o[0];
  }
}

}  // namespace moeserve::kernels::avx2
