// The loop order of the panel GEMMs on avx2::PackX's x: the AVX2 and avx512 tables' bf16 and FP8
// panel kernels (matmul_{bf16,fp8}_panels_{avx2,avx512}.cc). ISA-free: only the blocking.
#pragma once

#include <cstddef>

namespace moeserve::kernels {

// Column blocks of at most kc_max columns; in each, blocks of block_panels panels (a multiple of
// kGroup) that stay in L2 while every register tile of at most kTokens tokens sweeps them, kGroup
// panels at a time, the tile's x (kTokens × kc_max f32) staying in L1. tile(t, tokens, k0, kc, p,
// n, first) runs tokens [t, t + tokens) over panels [p, p + n) of columns [k0, k0 + kc), in the
// block whose first panel is `first` (the FP8 kernels keep a block's decoded panels in a buffer
// indexed from there, decoded by its first token tile: t = 0 runs before any later t of a block).
//
// Why the weights in L2 and x in L1, not a panel group in L1 and a token block's x in L2: per
// column a tile loads one weight line but broadcasts each of its tokens' x, so x's loads are the
// ones to keep in L1; the weight lines stream from L2 in order. One core (Ice Lake), 512 tokens,
// calls alternating in one process: avx512 bf16 [1536 x 3072] 132-134 -> 145-149 GFLOP/s, FP8
// 124 -> 135; AVX2 bf16 [1536 x 3072] 69-85 -> 79-95, [3072 x 1536] at 128 tokens 61-77 -> 80-90.
//
// With kc_max = k and block_panels = kGroup the order is panel-major instead: for an x that fits
// L2 whole (decode batches), each panel streams from DRAM once and sums its whole k in registers.
//
// The first column block may be narrower (kc_first <= kc_max), so that every later one starts
// where the caller needs blocks to start (the FP8 GEMMs: on a scale block of the full weight,
// whose partial sums they scale as they end).
template <size_t kGroup, size_t kTokens, typename TileFn>
inline void ForEachPanelBlockTile(size_t m, size_t k, size_t panels, size_t kc_max,
                                  size_t block_panels, const TileFn& tile,
                                  size_t kc_first = ~size_t{0}) {
  for (size_t k0 = 0, kc; k0 < k; k0 += kc) {
    const size_t limit = k0 == 0 && kc_first < kc_max ? kc_first : kc_max;
    kc = k - k0 < limit ? k - k0 : limit;
    for (size_t p0 = 0; p0 < panels; p0 += block_panels) {
      const size_t p1 = panels - p0 < block_panels ? panels : p0 + block_panels;
      for (size_t t = 0; t < m; t += kTokens) {
        const size_t tokens = m - t < kTokens ? m - t : kTokens;
        for (size_t p = p0; p < p1; p += kGroup)
          tile(t, tokens, k0, kc, p, p1 - p < kGroup ? p1 - p : kGroup, p0);
      }
    }
  }
}

// The order for a small x (a decode batch's tokens, a few dozen at most): each group of kGroup
// panels in turn, its columns in blocks of kc_max (the first kc_first, as above), and every
// register tile of at most kTokens tokens over a block before the next block: the group's block
// comes from DRAM (its tiles requesting it ahead) for the first tile and from L1 for the others,
// while the next block streams in. The order above reads a whole panel block from DRAM in its
// first tile and leaves the later tiles nothing to overlap with.
// tile(t, tokens, k0, kc, p, n, first) as above; a block is one group (first = p). The avx2 /
// avx512 bf16 and FP8 panel GEMMs take this order up to kPanelGroupOrderMaxTokens tokens (each
// kernel's file has its measurements): at 64 a block's x (64 KiB) still sits in L2 beside the
// group's block.
inline constexpr size_t kPanelGroupOrderMaxTokens = 64;
template <size_t kGroup, size_t kTokens, typename TileFn>
inline void ForEachPanelGroupTile(size_t m, size_t k, size_t panels, size_t kc_max,
                                  const TileFn& tile, size_t kc_first = ~size_t{0}) {
  for (size_t p = 0; p < panels; p += kGroup) {
    const size_t n = panels - p < kGroup ? panels - p : kGroup;
    for (size_t k0 = 0, kc; k0 < k; k0 += kc) {
      const size_t limit = k0 == 0 && kc_first < kc_max ? kc_first : kc_max;
      kc = k - k0 < limit ? k - k0 : limit;
      for (size_t t = 0; t < m; t += kTokens)
        tile(t, m - t < kTokens ? m - t : kTokens, k0, kc, p, n, p);
    }
  }
}

}  // namespace moeserve::kernels
