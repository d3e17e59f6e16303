// The avx512 table's FP8 panel GEMV (1-7 tokens) on cores with VBMI and GFNI but no BF16 (Ice
// Lake): codes decoded to exact bf16 pairs by the GF(2)-affine byte maps of the amx GEMV
// (fp8_bytes_to_bf16_avx512.h: a vpermb, two vgf2p8affineqb, a test and two unpacks per 64 codes),
// each pair widened to two f32 columns by a shift and a mask, products on f32 FMAs.
//
// Why: the fp16 route (matmul_fp8_panels_avx512.cc) spends 6 port-0/5 uops per 16 codes (a byte
// shuffle, a shift, a mask, a two-uop vcvtph2ps, the FMA; 7 when it widened and shifted instead of
// the shuffle); this one ~15 per 64 at one token, which the
// FP8 bench checkpoint's decode needs to stream its experts near the read bandwidth on 2 cores;
// at M tokens ~11 + 4M per 64 against 24 + 4M (a batched decode's experts see a few tokens each).
// Cascade Lake (AVX-512 VNNI without VBMI / GFNI) keeps the fp16 route: the avx512 table asks the
// CPU once (Avx512Fp8PanelRows).
//
// Numerics: per lane (row), the fp16 route's and the AVX2 SmallTile's arithmetic: a running sum
// from y (a call that adds into y) or zero; per 128-column scale block one FMA chain over the
// columns in order, then acc += sum · scale. The weights here
// are e4m3 values, there e4m3 · 2^-8 (their sum multiplied back by 256 before the scale): every
// step of the chain is the same up to that power of two, so y is the same bit for bit unless a
// partial sum falls below 2^-118, where the scaled chain rounds in the subnormal range.
#include <immintrin.h>

#include <cstdint>

#include "kernels/fp8_bytes_to_bf16_avx512.h"
#include "kernels/fp8_panels.h"
#include "kernels/internal.h"
#include "kernels/simd_math_avx512.h"

namespace moeserve::kernels::avx512 {
namespace {

using amx::AffineDecoder;
using amx::kGroupCols;
using amx::LoadGroup;

constexpr size_t kRows = kFp8PanelRows;

// Read ahead of the stream into L2, as the amx GEMV does.
constexpr size_t kAhead = 4096;

// A vector of bf16 pairs (lane r: W[r, c] | W[r, c + 1] << 16) as the two f32 columns.
inline __m512 EvenColumn(__m512bh pairs) {
  return _mm512_castsi512_ps(_mm512_slli_epi32((__m512i)pairs, 16));
}
inline __m512 OddColumn(__m512bh pairs) {
  return _mm512_castsi512_ps(
      _mm512_and_si512((__m512i)pairs, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
}

// M tokens (rows of xr, ld apart, rounded to bf16) × P panels (at panel[p], scales[p]); rows[p]
// of panel p's 16 stored into y[p] (ldy between tokens). One chain per (panel, token), the
// columns in order. kMemAcc: the running sums over scale blocks (acc) live in L1, not in
// registers, so that two panels' block sums fit the 32 registers from 5 tokens (each broadcast of
// x then feeds two FMAs); the same values either way (a store and load of an f32 is exact).
template <int P, int M, bool kMemAcc = false>
void PanelTile(const AffineDecoder& d, const float* xr, size_t ld, const uint8_t* const panel[P],
               const float* const scales[P], size_t k, size_t col0, float* const y[P], size_t ldy,
               const size_t rows[P], bool accumulate) {
  __m512 acc[kMemAcc ? 1 : P][kMemAcc ? 1 : M];
  alignas(64) float acc_mem[kMemAcc ? P : 1][kMemAcc ? M : 1][kRows];
#pragma GCC unroll 2
  for (int p = 0; p < P; ++p)
#pragma GCC unroll 8
    for (int t = 0; t < M; ++t) {
      const __m512 start = accumulate ? _mm512_maskz_loadu_ps(TailMask16(rows[p]), y[p] + t * ldy)
                                      : _mm512_setzero_ps();
      if constexpr (kMemAcc)
        _mm512_store_ps(acc_mem[p][t], start);
      else
        acc[p][t] = start;
    }
  ForEachFp8ScaleBlock(col0, 0, k, [&](size_t c0, size_t c1, size_t b) {
    __m512 s[P][M];
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p)
#pragma GCC unroll 8
      for (int t = 0; t < M; ++t) s[p][t] = _mm512_setzero_ps();
    for (size_t c = c0; c < c1; c += kGroupCols) {
      __m512 w[P][kGroupCols];
#pragma GCC unroll 2
      for (int p = 0; p < P; ++p) {
        const uint8_t* g = panel[p] + c * kRows;
        _mm_prefetch(reinterpret_cast<const char*>(g) + kAhead, _MM_HINT_T1);
        __m512bh w01, w23;
        d.Decode(c + kGroupCols <= k ? _mm512_loadu_si512(g) : LoadGroup(panel[p], c, k), w01, w23);
        w[p][0] = EvenColumn(w01);
        w[p][1] = OddColumn(w01);
        w[p][2] = EvenColumn(w23);
        w[p][3] = OddColumn(w23);
      }
      auto column = [&](size_t j) {
#pragma GCC unroll 8
        for (int t = 0; t < M; ++t) {
          const __m512 xv = _mm512_set1_ps(xr[t * ld + c + j]);
#pragma GCC unroll 2
          for (int p = 0; p < P; ++p) s[p][t] = _mm512_fmadd_ps(xv, w[p][j], s[p][t]);
        }
      };
      if (c + kGroupCols <= c1) {
#pragma GCC unroll 4
        for (size_t j = 0; j < kGroupCols; ++j) column(j);
      } else {  // the view's last columns (k not a multiple of 4)
        for (size_t j = 0; j < c1 - c; ++j) column(j);
      }
    }
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) {
      const __m512 sc = _mm512_loadu_ps(scales[p] + b * kRows);
#pragma GCC unroll 8
      for (int t = 0; t < M; ++t) {
        if constexpr (kMemAcc)
          _mm512_store_ps(acc_mem[p][t],
                          _mm512_fmadd_ps(s[p][t], sc, _mm512_load_ps(acc_mem[p][t])));
        else
          acc[p][t] = _mm512_fmadd_ps(s[p][t], sc, acc[p][t]);
      }
    }
  });
  for (int p = 0; p < P; ++p)
    for (int t = 0; t < M; ++t) {
      const __mmask16 mask = TailMask16(rows[p]);
      float* out = y[p] + t * ldy;
      _mm512_mask_storeu_ps(out, mask, kMemAcc ? _mm512_load_ps(acc_mem[p][t]) : acc[p][t]);
    }
}

using TileFn = void (*)(const AffineDecoder&, const float*, size_t, const uint8_t* const*,
                        const float* const*, size_t, size_t, float* const*, size_t, const size_t*,
                        bool);
// Two panels at a time: two streams per core for the hardware prefetchers, and each broadcast of
// x and each decoded group serve twice the chains. One core, [1536 x 3072] from the LLC / DRAM,
// 21 calls alternating with the fp16 route: 1.07-1.30x at 1-3 tokens, 1.55x at 4 (1.38x one panel
// at a time), 1.08-1.22x at 5-7 one panel at a time. From 5 tokens two panels' sums and acc
// would not fit the registers: acc goes to L1 (kMemAcc). Against one panel at a time, one core,
// [3072 x 3072] from DRAM, 11-15 rounds alternating: 5 / 6 / 7 / 8 tokens 76.9 / 85.7 / 85.5 /
// 85.1 -> 85.9 / 96.1 / 99.7 / 100.5 GFLOP/s, 12 / 16 (groups of 6 / 8) 85.3-86.3 / 87.3 ->
// 93.0-96.1 / 103.9; [1536 x 3072] at 7 84.2 -> 99.5.
constexpr size_t kPairMaxTokens = 4;
constexpr TileFn kPairTiles[kPairMaxTokens + 1] = {nullptr, PanelTile<2, 1>, PanelTile<2, 2>,
                                                   PanelTile<2, 3>, PanelTile<2, 4>};
constexpr size_t kGroupMaxTokens = 8;  // tokens per pass over a panel (pair)
constexpr TileFn kPairMemTiles[kGroupMaxTokens + 1] = {nullptr,
                                                       nullptr,
                                                       nullptr,
                                                       nullptr,
                                                       nullptr,
                                                       PanelTile<2, 5, true>,
                                                       PanelTile<2, 6, true>,
                                                       PanelTile<2, 7, true>,
                                                       PanelTile<2, 8, true>};
constexpr TileFn kSingleTiles[kGroupMaxTokens + 1] = {
    nullptr,         PanelTile<1, 1>, PanelTile<1, 2>, PanelTile<1, 3>, PanelTile<1, 4>,
    PanelTile<1, 5>, PanelTile<1, 6>, PanelTile<1, 7>, PanelTile<1, 8>};

}  // namespace

// 8-16 tokens (a batched decode's attention projections, its larger experts): each panel pair in
// turn, its tokens in groups of at most 8, so the pair's codes come from DRAM once and from L2 for
// the next group, and every token's chains are those of the GEMV (y row t is the same whatever m).
// Against the f32 GEMM (each block decoded once into f32 in L2, then its 12- and 4-token tiles),
// one core, from DRAM, 15 rounds alternating, GFLOP/s, one panel at a time: [3072 x 3072] at 8 /
// 12 / 16 tokens 55.9 / 73.8 / 82.0 -> 87.7 / 87.2 / 91.0 (at 20: 88.4 vs 86.5), [3072 x 1536] at
// 8 57.9 -> 88.2, [8192 x 3072] at 16 74.1 -> 89.1; the pairs add 7-19% (above).
void GemvFp8PanelsAffine(const float* xr, size_t ld, size_t m, const WeightMatrix& w, float* y,
                         size_t ldy, bool accumulate) {
  const AffineDecoder d;
  const size_t groups = (m + kGroupMaxTokens - 1) / kGroupMaxTokens;
  ForEachFp8PanelPairOrLast(
      w, y,
      [&](const uint8_t* const* pp, const float* const* ps, float* const* yp, const size_t* rows,
          size_t n) {
        for (size_t g = 0, t0 = 0; g < groups; ++g) {  // balanced groups: 9 = 5 + 4
          const size_t t1 = m * (g + 1) / groups, tm = t1 - t0;
          float* const yt[2] = {yp[0] + t0 * ldy, yp[1] + t0 * ldy};
          const float* const xt = xr + t0 * ld;
          if (n == 2)
            (tm <= kPairMaxTokens ? kPairTiles : kPairMemTiles)[tm](
                d, xt, ld, pp, ps, w.cols, w.col0, yt, ldy, rows, accumulate);
          else
            kSingleTiles[tm](d, xt, ld, pp, ps, w.cols, w.col0, yt, ldy, rows, accumulate);
          t0 = t1;
        }
      });
}

}  // namespace moeserve::kernels::avx512
