// GEMV (m ≤ 2) over FP8 weights in 16-row panels (fp8_panels.h) on the AMX cores' AVX-512 units:
// codes decoded to exact bf16 (fp8_bytes_to_bf16_avx512.h), products summed by vdpbf16ps.
//
// Why: the f32-FMA panel GEMV (matmul_fp8_panels_avx512.cc) spends 7 port-0/5 instructions per
// 16 codes (widen, two shifts, a mask, a two-uop vcvtph2ps, the FMA) and read ~20 GB/s from the
// LLC as from DRAM on Emerald Rapids: compute-bound below the read bandwidth. Here 64 codes (a
// panel's 4 columns) took a vpermb, two vpermt2b, a ternlog and two unpacks (the byte tables),
// then two vdpbf16ps per token: 1.1-1.4x the f32 kernel's rate from L1 for 1 to 3 tokens; the
// GF(2)-affine decode (AffineDecoder: a vpermb, two vgf2p8affineqb, a test and two unpacks where
// no code has exponent 0) another 1.05x from DRAM, 1.23x from L2. From 3 on the tile unit
// (matmul_quant_amx.cc) is faster (its products off the vector ports; 1.3x at 3 tokens, even at
// 2, 0.9x at 1, from DRAM), so the amx table sends this GEMV only 1 and 2 tokens.
//
// Decode: the codes are reordered by one vpermb, each code's low and high bf16 byte computed
// (AffineDecoder), and two vpunpck interleave low and high bytes into the pairs vdpbf16ps wants:
// lane r = (W[r, c], W[r, c + 1]). A panel's 64 bytes at column c hold columns c .. c + 3 (16 rows
// each), so this needs no change of the panel layout the AVX2 and tile kernels stream. VBMI
// (vpermb, vpermt2b) and GFNI are on every AMX core (MachineIsa requires both for kAmx).
//
// Numerics: x rounded to bf16; per lane, per 128-column scale block, Σ x · e4m3 by vdpbf16ps
// (products exact, two f32 adds per pair, even and odd column pairs in two chains added at the
// block's end), then acc += sum · scale (one FMA). The same reference within a reordered sum's
// roundings; vdpbf16ps flushes bf16 subnormals of x (below 2^-126) to zero. A panel's sums are the
// same alone or paired, so y does not depend on how rows were split over threads.
#include <immintrin.h>

#include <cstdint>

#include "kernels/fp8_bytes_to_bf16_avx512.h"
#include "kernels/fp8_panels.h"
#include "kernels/internal.h"

namespace moeserve::kernels::amx {
namespace {

constexpr size_t kRows = kFp8PanelRows;
constexpr size_t kTile = avx512bf16::kBf16PanelXTile;  // tokens per x tile (kPanelPairs layout)

inline __m512bh Broadcast(const uint32_t* pair) {
  return (__m512bh)_mm512_set1_epi32(static_cast<int>(*pair));
}

inline void Store(float* y, __m512 v, size_t rows, bool accumulate) {
  const __mmask16 mask = rows >= 16 ? __mmask16(0xffff) : __mmask16((1u << rows) - 1);
  if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, y));
  _mm512_mask_storeu_ps(y, mask, v);
}

// Read ahead of the stream into L2: without it the GEMV read 55-60% of the read probe from DRAM,
// with it 73-87% (bench_quant --gemv --m 1; 1-16 KiB ahead, T0 or T1, could not be ranked).
constexpr size_t kAhead = 4096;

// vdpbf16ps has a long latency on these cores (~28 cycles measured on Emerald Rapids, one issued
// per 2 cycles): a stream wants ~14 independent sums in flight. Each panel keeps 2 · U chains per
// token (the group's column pairs (c, c + 1) and (c + 2, c + 3), U groups in a row), added at the
// end of each scale block: 8 chains for one token (two panels, U = 2), 8 for two (U = 1).
//
// M tokens (x: their pair tile, xp[i · kTile + t] = pair i of token t) × P panels (at panel[p],
// scales[p]), U groups per step; rows[p] ≤ 16 of panel p's rows stored into y[p] (ldy between
// tokens).
template <int P, int M, int U>
void PanelTile(const AffineDecoder& d, const uint32_t* xp, const uint8_t* const panel[P],
               const float* const scales[P], size_t k, size_t col0, float* const y[P], size_t ldy,
               const size_t rows[P], bool accumulate) {
  __m512 acc[P][M];
  for (int p = 0; p < P; ++p)
    for (int t = 0; t < M; ++t) acc[p][t] = _mm512_setzero_ps();
  ForEachFp8ScaleBlock(col0, 0, k, [&](size_t c0, size_t c1, size_t b) {
    __m512 s[P][M][2 * U];
    for (int p = 0; p < P; ++p)
      for (int t = 0; t < M; ++t)
        for (int u = 0; u < 2 * U; ++u) s[p][t][u] = _mm512_setzero_ps();
    // Steps of U whole groups; the block's last columns (fewer than U groups) after them.
    size_t c = c0;
    for (; c + U * kGroupCols <= c1; c += U * kGroupCols) {
#pragma GCC unroll 2
      for (int u = 0; u < U; ++u) {
        const size_t cu = c + u * kGroupCols, i = cu / 2;
        __m512bh w01[P], w23[P];
#pragma GCC unroll 2
        for (int p = 0; p < P; ++p) {
          const uint8_t* g = panel[p] + cu * kRows;
          _mm_prefetch(reinterpret_cast<const char*>(g) + kAhead, _MM_HINT_T1);
          d.Decode(_mm512_loadu_si512(g), w01[p], w23[p]);
        }
#pragma GCC unroll 8
        for (int t = 0; t < M; ++t) {
          const __m512bh x01 = Broadcast(xp + i * kTile + t);
          const __m512bh x23 = Broadcast(xp + (i + 1) * kTile + t);
#pragma GCC unroll 2
          for (int p = 0; p < P; ++p) {
            s[p][t][2 * u] = _mm512_dpbf16_ps(s[p][t][2 * u], w01[p], x01);
            s[p][t][2 * u + 1] = _mm512_dpbf16_ps(s[p][t][2 * u + 1], w23[p], x23);
          }
        }
      }
    }
    for (; c < c1; c += kGroupCols) {  // at most U - 1 whole groups, then a cut one (at k)
      const size_t i = c / 2;
      __m512bh w01[P], w23[P];
      for (int p = 0; p < P; ++p) d.Decode(LoadGroup(panel[p], c, k), w01[p], w23[p]);
      for (int t = 0; t < M; ++t) {
        const __m512bh x01 = Broadcast(xp + i * kTile + t);
        for (int p = 0; p < P; ++p) s[p][t][0] = _mm512_dpbf16_ps(s[p][t][0], w01[p], x01);
        if (c + 2 < k) {  // the group has a column pair (c + 2, c + 3)
          const __m512bh x23 = Broadcast(xp + (i + 1) * kTile + t);
          for (int p = 0; p < P; ++p) s[p][t][1] = _mm512_dpbf16_ps(s[p][t][1], w23[p], x23);
        }
      }
    }
    for (int p = 0; p < P; ++p) {
      const __m512 sc = _mm512_loadu_ps(scales[p] + b * kRows);
      for (int t = 0; t < M; ++t) {
        __m512 sum = s[p][t][0];
        for (int u = 1; u < 2 * U; ++u) sum = _mm512_add_ps(sum, s[p][t][u]);
        acc[p][t] = _mm512_fmadd_ps(sum, sc, acc[p][t]);
      }
    }
  });
  for (int p = 0; p < P; ++p)
    for (int t = 0; t < M; ++t) Store(y[p] + t * ldy, acc[p][t], rows[p], accumulate);
}

// Groups per step: one token needs two to have 8 chains in flight (2 panels × 2 pairs × U).
template <int M>
constexpr int kUnroll = M == 1 ? 2 : 1;

using TileFn = void (*)(const AffineDecoder&, const uint32_t*, const uint8_t* const*,
                        const float* const*, size_t, size_t, float* const*, size_t, const size_t*,
                        bool);
template <int P>
constexpr TileFn kTiles[kFp8GemvMaxTokens + 1] = {nullptr, PanelTile<P, 1, kUnroll<1>>,
                                                  PanelTile<P, 2, kUnroll<2>>};

}  // namespace

void GemvFp8Panels(const uint32_t* xp, size_t m, const WeightMatrix& w, float* y, size_t ldy,
                   bool accumulate) {
  const AffineDecoder d;
  // Two panels at a time: two streams per core for the hardware prefetchers, and each decoded
  // group serves twice the chains.
  ForEachFp8PanelPairOrLast(w, y,
                            [&](const uint8_t* const* pp, const float* const* ps, float* const* yp,
                                const size_t* rows, size_t n) {
                              (n == 2 ? kTiles<2>[m] : kTiles<1>[m])(d, xp, pp, ps, w.cols, w.col0,
                                                                     yp, ldy, rows, accumulate);
                            });
}

}  // namespace moeserve::kernels::amx
