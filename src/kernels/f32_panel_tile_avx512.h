// The register tile of the avx512 table's panel GEMMs on f32 FMAs (bf16 panels:
// matmul_bf16_panels_avx512.cc; FP8 panels: matmul_fp8_panels_avx512.cc): up to 12 tokens of
// avx2::PackX's packed x (two 6-token tiles) × up to 4 panels of 16 rows, one zmm accumulator per
// (token, panel), at most 24 of them (bf16: 12 x 2; FP8: 6 x 4). Per column, P weight vectors and
// M broadcasts feed M · P FMAs.
// Include only from TUs built with the AVX-512 flags.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstddef>
#include <utility>

#include "kernels/internal.h"
#include "kernels/simd_math_avx512.h"

namespace moeserve::kernels::avx512 {

inline constexpr size_t kXTileTokens = avx2::kPackedXTile;  // tokens per packed x tile
inline constexpr int kMaxTileTokens = 2 * kXTileTokens;     // a register tile spans two x tiles
inline constexpr size_t kPanelTileRows = 16;                // rows per panel (one zmm)

// M tokens × P panels of f32 sums.
template <int M, int P>
struct F32PanelTile {
  // The accumulators, P weights and a broadcast in 32 registers; the unroll pragmas cover P <= 4.
  static_assert(M <= kMaxTileTokens && P <= 4 && M * P <= 24);
  __m512 acc[M][P];

  F32PanelTile() {
#pragma GCC unroll 12
    for (int t = 0; t < M; ++t)
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) acc[t][p] = _mm512_setzero_ps();
  }

  // acc[t][p] += x[t, c] · w[p], for column c of the block whose packed x starts at x0 (tokens
  // 0-5) and x1 (tokens 6-11, the next x tile; read only when M > 6).
  inline void Column(const float* x0, const float* x1, size_t c, const __m512 (&w)[P]) {
#pragma GCC unroll 12
    for (int t = 0; t < M; ++t) {
      const float* xt = t < int(kXTileTokens) ? x0 + t : x1 + (t - kXTileTokens);
      const __m512 xv = _mm512_set1_ps(xt[c * kXTileTokens]);
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) acc[t][p] = _mm512_fmadd_ps(xv, w[p], acc[t][p]);
    }
  }

  // to[t, p · 16 + r] = acc[t][p] · scale[p] + (from ? from[t, p · 16 + r] : 0) in one
  // rounding, lane r, for r < rows[p] (rows ld_from / ld_to apart): a block sum scaled into a
  // running sum (the FP8 GEMM's, fp8_panels.h). from may equal to.
  void ScaleInto(const __m512 (&scale)[P], const float* from, size_t ld_from, float* to,
                 size_t ld_to, const size_t rows[P]) const {
#pragma GCC unroll 12
    for (int t = 0; t < M; ++t)
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const __mmask16 mask = TailMask16(rows[p]);
        const __m512 sum =
            from ? _mm512_maskz_loadu_ps(mask, from + t * ld_from + p * kPanelTileRows)
                 : _mm512_setzero_ps();
        _mm512_mask_storeu_ps(to + t * ld_to + p * kPanelTileRows, mask,
                              _mm512_fmadd_ps(acc[t][p], scale[p], sum));
      }
  }

  // y[t, p · 16 + r] (= or +=) acc[t][p] lane r, for r < rows[p].
  void Store(float* y, size_t ldy, const size_t rows[P], bool accumulate) const {
#pragma GCC unroll 12
    for (int t = 0; t < M; ++t)
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const __mmask16 mask = TailMask16(rows[p]);
        float* out = y + t * ldy + p * kPanelTileRows;
        __m512 v = acc[t][p];
        if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, out));
        _mm512_mask_storeu_ps(out, mask, v);
      }
  }
};

// The table of a kernel's register tiles: table[p][m] = make.template operator()<m, p>() for
// 1 <= p <= kGroup panels and 1 <= m <= kTokens tokens (index 0 empty), so that a call picks its
// tile by the group's panel count and the tile's token count.
template <int P, typename Make, typename Table, size_t... M>
constexpr void FillTileRow(const Make& make, Table& table, std::index_sequence<M...>) {
  ((table[P][M + 1] = make.template operator()<int(M + 1), P>()), ...);
}
template <size_t kTokens, typename Make, typename Table, size_t... P>
constexpr void FillTileRows(const Make& make, Table& table, std::index_sequence<P...>) {
  (FillTileRow<int(P + 1)>(make, table, std::make_index_sequence<kTokens>()), ...);
}
template <size_t kGroup, size_t kTokens, typename Make>
constexpr auto TileTable(const Make& make) {
  using Fn = decltype(make.template operator()<1, 1>());
  std::array<std::array<Fn, kTokens + 1>, kGroup + 1> table{};
  FillTileRows<kTokens>(make, table, std::make_index_sequence<kGroup>());
  return table;
}

}  // namespace moeserve::kernels::avx512
