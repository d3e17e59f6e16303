// AVX-512 BF16 MatMul over bf16 weights in 16-row panels (bf16_panels.h), with vdpbf16ps.
//
// Why: the AVX2 panel kernel widens bf16 to f32 and FMAs, 16 multiply-adds per 256-bit FMA. On
// an AVX-512 BF16 core one vdpbf16ps does 32 (16 rows × a pair of columns), so the prefill of
// the attention projections and the LM head has twice the compute rate from the same panels.
//
// vdpbf16ps wants, in lane r, the pair (W[r, 2i], W[r, 2i + 1]): exactly a panel's column pair
// i, 64 contiguous bytes, loaded as they stand. x is packed per call into pairs (x[t, 2i],
// x[t, 2i + 1]) as one int32, tiles of kTile tokens; one broadcast of a token's pair serves the
// tile's two panels.
//
// Numerics: x rounded to bf16, products exact in f32, sums in f32 in the kernel's order (per lane
// the pair's two products, column pair by column pair; the GEMV's two chains added at the end):
// as the AVX2 panel kernel, only the order differs. vdpbf16ps flushes bf16 subnormals (below
// 2^-126) to zero.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/bf16_panel_pairs_avx512.h"
#include "kernels/bf16_panels.h"
#include "kernels/internal.h"
#include "kernels/transpose_avx512.h"

namespace moeserve::kernels::avx512bf16 {
namespace {

constexpr size_t kRows = kBf16PanelRows;
constexpr size_t kTile = kBf16PanelXTile;

inline __m512bh AsBh(__m512i v) {
  return (__m512bh)v;
}

inline __m512bh Broadcast(const uint32_t* pair) {
  return AsBh(_mm512_set1_epi32(static_cast<int>(*pair)));
}

inline void Store(float* y, __m512 v, size_t rows, bool accumulate) {
  const __mmask16 mask = rows >= 16 ? __mmask16(0xffff) : __mmask16((1u << rows) - 1);
  if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, y));
  _mm512_mask_storeu_ps(y, mask, v);
}

// xp + i·kTile: the M tokens' pairs of column pair i into acc[P][M], w[p] panel p's pairs; one
// broadcast of each token's pair serves both panels.
template <int P, int M>
inline void TileStep(const uint32_t* xp, size_t i, const __m512bh w[P], __m512 acc[P][M]) {
#pragma GCC unroll 12
  for (int t = 0; t < M; ++t) {
    const __m512bh x = Broadcast(xp + i * kTile + t);
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) acc[p][t] = _mm512_dpbf16_ps(acc[p][t], w[p], x);
  }
}

// The W block the GEMM's tiles take after the current one (the next two panels, whole k), requested
// into L2 a share per tile. Why: a block serves every token tile from L2, but the first tile read
// it from DRAM at its own rate (128 bytes per ~12 cycles, about 40 GB/s per core), more than a
// core gets while both stream; MoE experts' W is never cache resident. Spread over the current
// block's tiles, the next block arrives at a fraction of that rate. Tile `index` of `tiles`
// requests column pairs index, index + tiles, ... (each pair's line of both panels), evenly over
// its steps. MoE-like A/B (32 cold [1536, 3072] or [3072, 1536] experts, 2 threads, Zen 5,
// interleaved; then with 512-pair column blocks): 1.05-1.13x at 36 and 128 tokens, 1.0-1.05x at
// 512; all of a tile's requests in its first steps instead measured 0.99-1.09x.
struct NextBlock {
  const bf16* panel[2] = {nullptr, nullptr};  // either may be null
  size_t pairs = 0;
  size_t index = 0, tiles = 1;

  // How many pairs this tile requests.
  size_t Requests() const { return pairs > index ? (pairs - index + tiles - 1) / tiles : 0; }
  // Its r-th (always_inline: GCC may drop a prefetch-only call it did not inline as dead code).
  [[gnu::always_inline]] void Request(size_t r) const {
    const size_t pair = index + r * tiles;
    for (const bf16* p : panel)
      if (p) _mm_prefetch(reinterpret_cast<const char*>(p + 2 * pair * kRows), _MM_HINT_T1);
  }
};

// M tokens (xp: a packed tile at column pair 0 of this block) × P consecutive panels (P · 16
// rows; the second at panel + stride) over `pairs` column pairs (an odd k's last pair: its second
// column zero in the panel and in x); `rows` ≤ P · 16 of the rows are stored. `next`: its share of
// the next block.
template <int P, int M>
void PanelTile(const uint32_t* xp, const bf16* panel, size_t stride, size_t pairs, float* y,
               size_t ldy, size_t rows, bool accumulate, const NextBlock& next) {
  __m512 acc[P][M];
  __m512bh w[P];
#pragma GCC unroll 12
  for (int t = 0; t < M; ++t)
    for (int p = 0; p < P; ++p) acc[p][t] = _mm512_setzero_ps();
  // The requests spread evenly over the steps, one before each run of `gap` steps.
  const size_t requests = next.Requests();
  const size_t gap = requests == 0 ? pairs : (pairs + requests - 1) / requests;
  for (size_t i = 0, r = 0; i < pairs; ++r) {
    if (r < requests) next.Request(r);
    const size_t end = pairs - i < gap ? pairs : i + gap;
    for (; i < end; ++i) {
      for (int p = 0; p < P; ++p) w[p] = AsBh(LoadPairs(panel + p * stride, i));
      TileStep<P, M>(xp, i, w, acc);
    }
  }
#pragma GCC unroll 12
  for (int t = 0; t < M; ++t) {
    Store(y + t * ldy, acc[0][t], rows, accumulate);
    if (P == 2 && rows > kRows) Store(y + t * ldy + kRows, acc[P - 1][t], rows - kRows, accumulate);
  }
}

using TileFn = void (*)(const uint32_t*, const bf16*, size_t, size_t, float*, size_t, size_t, bool,
                        const NextBlock&);
template <int P>
constexpr TileFn kTiles[kTile + 1] = {
    nullptr,          PanelTile<P, 1>,  PanelTile<P, 2>, PanelTile<P, 3>, PanelTile<P, 4>,
    PanelTile<P, 5>,  PanelTile<P, 6>,  PanelTile<P, 7>, PanelTile<P, 8>, PanelTile<P, 9>,
    PanelTile<P, 10>, PanelTile<P, 11>, PanelTile<P, 12>};

// One token against P (1 or 2) panels at once, two accumulators each (even / odd pairs) so the
// vdpbf16ps latency does not bound the stream; two distant panels give the hardware prefetchers
// two streams per core (as the AVX2 kernel's PanelPair1). A panel's sums are the same whether it
// goes alone or paired, so decode's y does not depend on how the rows were split over threads.
// rows[p] ≤ 16 of panel p's rows are stored.
template <int P>
void PanelStream1(const uint32_t* xp, const bf16* const panel[P], size_t pairs, bool odd,
                  float* const y[P], const size_t rows[P], bool accumulate) {
  __m512 a0[P], a1[P];
  for (int p = 0; p < P; ++p) a0[p] = a1[p] = _mm512_setzero_ps();
  const size_t full = odd ? pairs - 1 : pairs;
  size_t i = 0;
  // No software prefetch: the hardware prefetchers alone follow two panel streams per core at
  // the read probe's rate, and requests of our own cap it. Zen 4, 2 threads, q/k/o_proj and LM
  // head shapes from DRAM, an in-process A/B against a plain read of the same bytes: in a fast
  // host state (probe ~57-60 GB/s) 1.03-1.05x the probe without them, 0.74x with requests
  // 16 KiB ahead into L2 (4-32 KiB: 0.73-0.77x; 2 KiB into L1: 0.96x); when the host gives
  // ~35 GB/s, 1.01x against 0.92-0.95x. (Stop 20 had found "none" as good as L2 requests, in
  // a slow state only.)
  for (; i + 2 <= full; i += 2) {
    const __m512bh x0 = Broadcast(xp + i * kTile), x1 = Broadcast(xp + (i + 1) * kTile);
    for (int p = 0; p < P; ++p) a0[p] = _mm512_dpbf16_ps(a0[p], AsBh(LoadPairs(panel[p], i)), x0);
    for (int p = 0; p < P; ++p)
      a1[p] = _mm512_dpbf16_ps(a1[p], AsBh(LoadPairs(panel[p], i + 1)), x1);
  }
  for (; i < pairs; ++i) {
    const __m512bh x0 = Broadcast(xp + i * kTile);
    for (int p = 0; p < P; ++p) a0[p] = _mm512_dpbf16_ps(a0[p], AsBh(LoadPairs(panel[p], i)), x0);
  }
  for (int p = 0; p < P; ++p) Store(y[p], _mm512_add_ps(a0[p], a1[p]), rows[p], accumulate);
}

}  // namespace

size_t Bf16PanelXPairs(size_t m, size_t k) {
  return (m + kTile - 1) / kTile * ((k + 1) / 2) * kTile;
}

void PackBf16PanelXTile(const float* const rows[kTile], size_t k, uint32_t* tile) {
  // 16 column pairs of the tile's tokens at a time: each token's 16 pairs in a register (rows
  // 12..15 zero), a 16 × 16 transpose, and each pair's 12 tokens stored as one 48-byte run. The
  // per-token scalar stores this replaces (stride 48 bytes) cost ~12% of a bf16 GEMM's time at
  // 512 tokens.
  const size_t pairs = (k + 1) / 2;
  for (size_t i0 = 0; i0 < pairs; i0 += 16) {
    __m512i r[16];
    for (size_t s = 0; s < 16; ++s)
      r[s] = s < kTile && rows[s] ? RowPairs(rows[s], k, i0) : _mm512_setzero_si512();
    Transpose16x16(r);
    const size_t n = pairs - i0 < 16 ? pairs - i0 : 16;
    for (size_t c = 0; c < n; ++c)
      _mm512_mask_storeu_epi32(tile + (i0 + c) * kTile, __mmask16((1u << kTile) - 1), r[c]);
  }
}

void PackBf16PanelX(const float* xr, size_t ldxr, size_t m, size_t k, uint32_t* xp) {
  const size_t pairs = (k + 1) / 2;
  for (size_t t0 = 0; t0 < m; t0 += kTile) {
    const float* rows[kTile];
    for (size_t t = 0; t < kTile; ++t) rows[t] = t0 + t < m ? xr + (t0 + t) * ldxr : nullptr;
    PackBf16PanelXTile(rows, k, xp + t0 / kTile * pairs * kTile);
  }
}

size_t XTokenBlock(size_t k) {
  constexpr size_t kXBudget = 2 << 20;
  const size_t tile_bytes = (k + 1) / 2 * kTile * sizeof(uint32_t);
  return (kXBudget / tile_bytes > 1 ? kXBudget / tile_bytes : 1) * kTile;
}

void MatMulBf16Panels(const uint32_t* xp, size_t m, const WeightMatrix& w, float* y, size_t ldy,
                      bool accumulate) {
  const size_t k = w.cols, pairs = (k + 1) / 2, panels = (w.rows + kRows - 1) / kRows;
  const auto* base = static_cast<const bf16*>(w.data);
  if (m == 1) {
    // Decode: the full panels in pairs (j, j + half), two streams at once; an odd or partial
    // last panel alone, with the same arithmetic.
    const size_t full = w.rows / kRows, half = full / 2;
    for (size_t j = 0; j < half; ++j) {
      const bf16* const two[2] = {base + j * w.row_stride, base + (j + half) * w.row_stride};
      float* const ys[2] = {y + j * kRows, y + (j + half) * kRows};
      const size_t rows[2] = {kRows, kRows};
      PanelStream1<2>(xp, two, pairs, k % 2, ys, rows, accumulate);
    }
    for (size_t p = 2 * half; p < panels; ++p) {
      const bf16* const one[1] = {base + p * w.row_stride};
      float* const ys[1] = {y + p * kRows};
      const size_t rows[1] = {w.rows - p * kRows < kRows ? w.rows - p * kRows : kRows};
      PanelStream1<1>(xp, one, pairs, k % 2, ys, rows, accumulate);
    }
    return;
  }
  // Every tile runs a panel pair's whole k in registers: no partial sums through y (per column
  // block they cost ~10%: 512-pair blocks at 128 and 512 tokens, 1.10-1.18x without them), and W
  // streams past x once per token block. A token block's x (at most kXBudget) is read again for
  // every panel pair: from L2 while it fits, else from the LLC, where the tile's sequential reads
  // of 48 bytes per column pair keep up. Each tile: 12 tokens × 32 rows, 24 accumulators.
  const size_t mc = XTokenBlock(k);
  // The block after panels [p, p + 2) of token block t0: the next two panels, else the first two
  // for the next token block; none after the last.
  auto next_block = [&](size_t t0, size_t p) {
    NextBlock nb;
    if (p + 2 < panels) {
      p += 2;
    } else {
      if (t0 + mc >= m) return nb;
      p = 0;
    }
    nb.pairs = pairs;
    for (size_t j = 0; j < 2 && p + j < panels; ++j) nb.panel[j] = base + (p + j) * w.row_stride;
    return nb;
  };
  for (size_t t0 = 0; t0 < m; t0 += mc) {
    const size_t t1 = m - t0 < mc ? m : t0 + mc;
    const size_t tiles = (t1 - t0 + kTile - 1) / kTile;
    // Two panels (32 rows) per tile, a last odd panel alone.
    for (size_t p = 0; p < panels; p += 2) {
      const size_t np = panels - p >= 2 ? 2 : 1, left = w.rows - p * kRows;
      const size_t rows = left < np * kRows ? left : np * kRows;
      NextBlock next = next_block(t0, p);
      next.tiles = tiles;
      for (size_t t = t0; t < t1; t += kTile, ++next.index) {
        const size_t tokens = t1 - t < kTile ? t1 - t : kTile;
        (np == 2 ? kTiles<2> : kTiles<1>)[tokens](
            xp + t / kTile * pairs * kTile, base + p * w.row_stride, w.row_stride, pairs,
            y + t * ldy + p * kRows, ldy, rows, accumulate, next);
      }
    }
  }
}

}  // namespace moeserve::kernels::avx512bf16
