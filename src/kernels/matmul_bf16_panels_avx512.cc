// AVX-512 F MatMul over bf16 weights repacked in 16-row panels (bf16_panels.h), on f32 FMAs: the
// avx512 table's (AVX-512 without BF16) bf16 GEMM and GEMV. x is avx2::PackX's f32 tiles of 6
// tokens, as for the AVX2 kernel, so both tables prepare x the same way.
//
// Why a kernel of its own: a panel's column pair is one 64-byte line, 16 rows × 2 columns, so one
// load and one shift (the pair's first column) or mask (its second) give a whole column of the
// panel in a register, where AVX2 needs two loads and two shuffles for 8 rows each; and 32
// registers hold a register tile of 12 tokens × 2 panels (24 accumulators): per column 1 weight
// load, 1 widening op and 12 broadcasts feed 24 FMAs (AVX2's 6 × 16 tile: 2 + 2 + 6 for 12 FMAs
// of half the width).
//
// Numerics: as the AVX2 kernel (x rounded to bf16, exact f32 products, f32 sums in column order
// per token and row, blocks of kBf16PanelSumCols added into y in order); the sums do not depend on
// how tokens or panels share a tile, nor on the batch size (the GEMV keeps the GEMM's order).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/bf16_panels.h"
#include "kernels/f32_panel_tile_avx512.h"
#include "kernels/internal.h"
#include "kernels/panel_schedule.h"
#include "kernels/simd_math_avx512.h"

namespace moeserve::kernels::avx512 {
namespace {

constexpr size_t kRows = kBf16PanelRows;
static_assert(kRows == kPanelTileRows);

// The 64-byte line of column pair i: lane r holds (W[r, 2i], W[r, 2i + 1]) as bf16 bits. Column
// 2i as f32 is the line shifted up by 16 bits per lane, column 2i + 1 the line with its low half
// masked off (bf16 is an f32's top half: both exact).
inline __m512i PairLine(const bf16* panel, size_t i) {
  return _mm512_loadu_si512(panel + 2 * i * kRows);
}
inline __m512 EvenColumn(__m512i line) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(line, 16));
}
inline __m512 OddColumn(__m512i line) {
  return _mm512_castsi512_ps(_mm512_and_si512(line, _mm512_set1_epi32(int(0xffff0000u))));
}

// Weights kPrefetchBytes ahead of pair i (one 64-byte line per pair): at small m the kernel
// streams W from DRAM, where the hardware prefetcher alone leaves bandwidth unused.
inline void Prefetch(const bf16* panel, size_t i) {
  constexpr size_t kPrefetchBytes = 4096;
  _mm_prefetch(reinterpret_cast<const char*>(panel + 2 * i * kRows) + kPrefetchBytes, _MM_HINT_T0);
}

// M tokens (x0, x1: their x tiles at the block's first column) × P panels (panel[p] at the
// block's first column) over kc columns. kStream: the panels come from DRAM
// (ForEachPanelGroupTile's order), so the tile requests them ahead.
template <int M, int P, bool kStream>
void PanelTile(const float* x0, const float* x1, const bf16* const* panel, size_t kc, float* y,
               size_t ldy, const size_t* rows, bool accumulate) {
  F32PanelTile<M, P> tile;
  size_t i = 0;
  for (; 2 * i + 2 <= kc; ++i) {
    __m512 w[P];
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) {
      if (kStream) Prefetch(panel[p], i);
      w[p] = EvenColumn(PairLine(panel[p], i));
    }
    tile.Column(x0, x1, 2 * i, w);
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) w[p] = OddColumn(PairLine(panel[p], i));
    tile.Column(x0, x1, 2 * i + 1, w);
  }
  if (2 * i < kc) {
    __m512 w[P];
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) w[p] = EvenColumn(PairLine(panel[p], i));
    tile.Column(x0, x1, 2 * i, w);
  }
  tile.Store(y, ldy, rows, accumulate);
}

// One token against P panels, in the GEMM's order (kBf16PanelSumCols): per block of columns one
// FMA chain per panel, even and odd columns in turn, so y is the GEMM's bit for bit. The P panels'
// chains are independent; at one FMA per 4 cycles each, two panels take 128 bytes of weights per
// 8 cycles, above what a core reads from DRAM.
template <int P>
void PanelGemv(const float* x, const bf16* const panel[P], size_t k, float* const y[P],
               const size_t rows[P], bool accumulate) {
  for (size_t k0 = 0; k0 < k; k0 += kBf16PanelSumCols) {
    const size_t k1 = k - k0 < kBf16PanelSumCols ? k : k0 + kBf16PanelSumCols;
    __m512 acc[P];
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) acc[p] = _mm512_setzero_ps();
    size_t i = k0 / 2;
    for (; 2 * i + 2 <= k1; ++i) {
      const __m512 x0 = _mm512_set1_ps(x[2 * i * kXTileTokens]);
      const __m512 x1 = _mm512_set1_ps(x[(2 * i + 1) * kXTileTokens]);
#pragma GCC unroll 2
      for (int p = 0; p < P; ++p) {
        Prefetch(panel[p], i);
        const __m512i line = PairLine(panel[p], i);
        acc[p] = _mm512_fmadd_ps(x0, EvenColumn(line), acc[p]);
        acc[p] = _mm512_fmadd_ps(x1, OddColumn(line), acc[p]);
      }
    }
    if (2 * i < k1) {
      const __m512 x0 = _mm512_set1_ps(x[2 * i * kXTileTokens]);
#pragma GCC unroll 2
      for (int p = 0; p < P; ++p)
        acc[p] = _mm512_fmadd_ps(x0, EvenColumn(PairLine(panel[p], i)), acc[p]);
    }
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) {  // as F32PanelTile::Store
      const __mmask16 mask = TailMask16(rows[p]);
      __m512 v = acc[p];
      if (accumulate || k0 > 0) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, y[p]));
      _mm512_mask_storeu_ps(y[p], mask, v);
    }
  }
}

// Register tiles of 12 tokens x 2 panels. One core, [1536 x 3072] bf16 at 512 tokens, 3 rounds
// against 6 x 4 and 6 x 3: 97-126 / 76-125 / 111-123 GFLOP/s, within this host's noise.
constexpr size_t kGroupPanels = 2, kGroupTokens = 12;
static_assert(kGroupTokens == size_t(kMaxTileTokens));  // a tile starts on an x tile
constexpr auto kTiles =
    TileTable<kGroupPanels, kGroupTokens>([]<int M, int P>() { return &PanelTile<M, P, false>; });
constexpr auto kStreamTiles =
    TileTable<kGroupPanels, kGroupTokens>([]<int M, int P>() { return &PanelTile<M, P, true>; });

// Up to kPanelGroupOrderMaxTokens tokens a call runs ForEachPanelGroupTile's order (each panel
// pair's 256-column block from DRAM once, every token tile over it from L1) rather than the blocked
// one. One core, [6144 x 3072] from DRAM, calls alternating in one process: 8 / 13 / 16 / 24 / 30
// tokens 0.82 / 0.70 / 0.79 / 0.85 / 0.84x the time, 36-64 0.88-0.91x, 96-128 0.94-0.95x, 256 1.0x
// (two threads at 16 / 24: 0.86 / 0.98x); [1024 x 3072] / [3072 x 6144] at 16 0.70 / 0.83x.

}  // namespace

void MatMulBf16Panels(const float* xp, size_t m, const WeightMatrix& w, float* y, size_t ldy,
                      bool accumulate) {
  const size_t k = w.cols, panels = (w.rows + kRows - 1) / kRows;
  const auto* base = static_cast<const bf16*>(w.data);
  auto rows_of = [&](size_t p) { return w.rows - p * kRows < kRows ? w.rows - p * kRows : kRows; };
  if (m == 1) {
    // Decode: panels in pairs (j, j + half), two distant streams at once for the prefetchers.
    const size_t half = panels / 2;
    for (size_t j = 0; j < half; ++j) {
      const bf16* pp[2] = {base + j * w.row_stride, base + (j + half) * w.row_stride};
      const size_t rows[2] = {rows_of(j), rows_of(j + half)};
      float* const yp[2] = {y + j * kRows, y + (j + half) * kRows};
      PanelGemv<2>(xp, pp, k, yp, rows, accumulate);
    }
    for (size_t p = 2 * half; p < panels; ++p) {
      const bf16* pp[1] = {base + p * w.row_stride};
      const size_t rows[1] = {rows_of(p)};
      float* const yp[1] = {y + p * kRows};
      PanelGemv<1>(xp, pp, k, yp, rows, accumulate);
    }
    return;
  }
  // Column blocks of 256 and panel blocks of 512 KiB (panel_schedule.h): one core, [1536 x 3072]
  // at 512 tokens, 3 rounds over 128-1024 columns x 256-1024 KiB were within the host's noise.
  constexpr size_t kKc = kBf16PanelSumCols,
                   kBlockPanels = (512 << 10) / (kKc * kRows * sizeof(bf16));
  static_assert(kBlockPanels % kGroupPanels == 0);
  const bool stream = m <= kPanelGroupOrderMaxTokens;
  const auto tile = [&](size_t t, size_t tokens, size_t k0, size_t kc, size_t p, size_t n, size_t) {
    const bf16* pp[kGroupPanels];
    size_t rows[kGroupPanels];
    for (size_t q = 0; q < kGroupPanels; ++q) {
      pp[q] = base + (p + (q < n ? q : 0)) * w.row_stride + k0 * kRows;
      rows[q] = q < n ? rows_of(p + q) : 0;
    }
    const float* x0 = xp + t * k + k0 * kXTileTokens;
    (stream ? kStreamTiles : kTiles)[n][tokens](x0, x0 + kXTileTokens * k, pp, kc,
                                                y + t * ldy + p * kRows, ldy, rows,
                                                accumulate || k0 > 0);
  };
  // Either order adds each 256-column block into y in column order: the same bits.
  if (stream)
    ForEachPanelGroupTile<kGroupPanels, kGroupTokens>(m, k, panels, kKc, tile);
  else
    ForEachPanelBlockTile<kGroupPanels, kGroupTokens>(m, k, panels, kKc, kBlockPanels, tile);
}

}  // namespace moeserve::kernels::avx512
