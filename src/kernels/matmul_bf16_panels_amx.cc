// AMX MatMul over bf16 weights in 16-row panels (bf16_panels.h): TDPBF16PS on 16 × 16 tiles.
//
// Why: one TDPBF16PS does 16 × 16 × 32 multiply-adds (8192) in 16 cycles, 512 per cycle and core
// where vdpbf16ps on two ports does 64: prefill (MoE experts, attention projections, LM head) is
// compute-bound on vdpbf16ps (73% of its peak at 512 tokens) and has ~8x the headroom on the tile
// unit of a Sapphire / Emerald / Granite Rapids core.
//
// Tiles: C[t, n] += Σ_i A[t, 2i .. 2i+1] · B[i, n], with
//   A = 16 tokens × 32 columns of x as bf16 (a token's 32 values in one 64-byte tile row), packed
//       once per call into A tiles (PackXTile: per 16 tokens, [k / 32][16 tokens][32]);
//   B = 16 column pairs × 16 weight rows, row i holding (W[n, 2i], W[n, 2i + 1]) for the 16 rows n:
//       exactly 16 of a panel's column pairs (1 KiB, bf16_panels.h), loaded from the panel itself;
//   C = 16 tokens × 16 weight rows, f32: a block of y as it is laid out, stored with y's stride.
// Registers: tmm0..3 = C of 2 token tiles × 2 panels, tmm4, 5 = A, tmm6, 7 = B; 4 TDPBF16PS per
// 4 tile loads.
//
// Numerics: as the vdpbf16ps panel kernel: x rounded to bf16 (as F32ToBf16), W exact, products
// exact, f32 sums; the order (and the tile unit's internal rounding of each 32-term step: it
// flushes bf16 and f32 subnormals, like vdpbf16ps) is the unit's. Tested against the dense
// reference with the reordered-sum tolerance.
#include <immintrin.h>

#include <cstdint>

#include "kernels/amx_tiles.h"
#include "kernels/bf16_panel_pairs_avx512.h"
#include "kernels/bf16_panels.h"
#include "kernels/internal.h"

namespace moeserve::kernels::amx {
namespace {

constexpr size_t kRows = kBf16PanelRows;  // weight rows per panel = C / B tile columns
constexpr size_t kTokens = kXTileTokens;  // tokens per A tile

// The W block the token passes take after the current one, requested into L2 a share per tile
// step: a block's first pass reads it from memory at one core's demand rate otherwise (MoE
// experts' W is never cache resident). Lines [0, lines) of each panel, spread over `steps`.
// It only partly works on Emerald Rapids (a scratch loop, 128 tokens, W from DRAM: 0.93-0.99x
// without it): a pair's first pass still costs 3-4x each later one, since the tile loads
// streaming A and B from L2 hold the fill buffers the prefetches need; nothing tried (prefetch
// distance or hint, demand touches, k-chunked passes holding B in L1) did better.
struct NextBlock {
  const bf16* panel[2] = {nullptr, nullptr};
  size_t lines = 0;  // 64-byte lines per panel
  size_t steps = 1;  // tile steps of all the block's passes

  [[gnu::always_inline]] void Request(size_t step) const {
    const size_t l0 = step * lines / steps, l1 = (step + 1) * lines / steps;
    for (const bf16* p : panel)
      if (p)
        for (size_t l = l0; l < l1; ++l)
          _mm_prefetch(reinterpret_cast<const char*>(p) + l * 64, _MM_HINT_T1);
  }
};

// C tile `kTile` into y (tokens × rows of it): straight from the tile unit when whole, else
// through `buf` (16 × 16 f32).
template <int kTile>
inline void StoreC(float* y, size_t ldy, size_t tokens, size_t rows, float* buf) {
  if (tokens == kTokens && rows == kRows) {
    MOESERVE_TILE_STORE_N(kTile, y, ldy * sizeof(float));
    return;
  }
  MOESERVE_TILE_STORE_N(kTile, buf, 64);
  const __mmask16 mask = rows >= 16 ? __mmask16(0xffff) : __mmask16((1u << rows) - 1);
  for (size_t t = 0; t < tokens; ++t)
    _mm512_mask_storeu_ps(y + t * ldy, mask, _mm512_load_ps(buf + t * 16));
}

// C tile `kTile` from y (tokens × rows of it; the tile's other rows zero): straight into the tile
// unit when whole, else through `buf`.
template <int kTile>
inline void LoadC(const float* y, size_t ldy, size_t tokens, size_t rows, float* buf) {
  if (tokens == kTokens && rows == kRows) {
    MOESERVE_TILE_LOAD_N(kTile, y, ldy * sizeof(float));
    return;
  }
  const __mmask16 mask = rows >= 16 ? __mmask16(0xffff) : __mmask16((1u << rows) - 1);
  for (size_t t = 0; t < kTokens; ++t)
    _mm512_store_ps(buf + t * 16,
                    t < tokens ? _mm512_maskz_loadu_ps(mask, y + t * ldy) : _mm512_setzero_ps());
  MOESERVE_TILE_LOAD_N(kTile, buf, 64);
}

// One pass: TA token tiles (xa, the second at xa + xstride) × TB panels (panel[], their B tiles
// the panels' own 1 KiB steps) over `blocks` tile steps. Step s of the pass is step `step0 + s`
// of the next block's prefetch schedule. kResume: the C tiles start from y (an earlier column
// chunk's sums, or y itself to accumulate into), else from zero.
template <int TA, int TB, bool kResume>
void TilePass(const uint32_t* xa, size_t xstride, size_t blocks, const bf16* const panel[2],
              const NextBlock& next, size_t step0, float* y, size_t ldy, size_t tokens,
              size_t rows) {
  alignas(64) float buf[kTokens * kRows];
  const size_t t0 = tokens < kTokens ? tokens : kTokens, r0 = rows < kRows ? rows : kRows;
  if (kResume) {
    LoadC<0>(y, ldy, t0, r0, buf);
    if (TB == 2) LoadC<1>(y + kRows, ldy, t0, rows - kRows, buf);
    if (TA == 2) LoadC<2>(y + kTokens * ldy, ldy, tokens - kTokens, r0, buf);
    if (TA == 2 && TB == 2)
      LoadC<3>(y + kTokens * ldy + kRows, ldy, tokens - kTokens, rows - kRows, buf);
  } else {
    MOESERVE_TILE_ZERO(0);
    if (TB == 2) MOESERVE_TILE_ZERO(1);
    if (TA == 2) MOESERVE_TILE_ZERO(2);
    if (TA == 2 && TB == 2) MOESERVE_TILE_ZERO(3);
  }
  for (size_t b = 0; b < blocks; ++b) {
    const size_t off = b * kTileWords, woff = b * 2 * kTileWords;  // uint32 / bf16 elements
    next.Request(step0 + b);
    MOESERVE_TILE_LOAD(4, xa + off, 64);
    MOESERVE_TILE_LOAD(6, panel[0] + woff, 64);
    MOESERVE_TILE_DP(0, 4, 6);
    if (TB == 2) {
      MOESERVE_TILE_LOAD(7, panel[1] + woff, 64);
      MOESERVE_TILE_DP(1, 4, 7);
    }
    if (TA == 2) {
      MOESERVE_TILE_LOAD(5, xa + xstride + off, 64);
      MOESERVE_TILE_DP(2, 5, 6);
      if (TB == 2) MOESERVE_TILE_DP(3, 5, 7);
    }
  }
  StoreC<0>(y, ldy, t0, r0, buf);
  if (TB == 2) StoreC<1>(y + kRows, ldy, t0, rows - kRows, buf);
  if (TA == 2) {
    float* y1 = y + kTokens * ldy;
    StoreC<2>(y1, ldy, tokens - kTokens, r0, buf);
    if (TB == 2) StoreC<3>(y1 + kRows, ldy, tokens - kTokens, rows - kRows, buf);
  }
}

using PassFn = void (*)(const uint32_t*, size_t, size_t, const bf16* const[2], const NextBlock&,
                        size_t, float*, size_t, size_t, size_t);
// [resume][two token tiles][two panels] (a template flag: the first chunk's passes, most calls'
// only ones, keep the loop without the loads of C).
constexpr PassFn kPasses[2][2][2] = {
    {{TilePass<1, 1, false>, TilePass<1, 2, false>},
     {TilePass<2, 1, false>, TilePass<2, 2, false>}},
    {{TilePass<1, 1, true>, TilePass<1, 2, true>}, {TilePass<2, 1, true>, TilePass<2, 2, true>}}};

}  // namespace

size_t XTileElems(size_t m, size_t k) {
  return (m + kTokens - 1) / kTokens * TileSteps(k) * kTileWords;
}

// x kept in L2 (at most 1 MiB of A tiles) while the weight panels pass. One definition for the
// tile kernels (the bf16 one's through Bf16XTokenBlock) and for matmul.cc's schedule, whose items
// are whole token blocks.
constexpr size_t kXBudget = 1 << 20;
size_t XTokenBlock(size_t k) {
  const size_t pass_bytes = 2 * TileSteps(k) * kTileWords * sizeof(uint32_t);
  return (kXBudget / pass_bytes > 1 ? kXBudget / pass_bytes : 1) * 2 * kXTileTokens;
}

size_t Bf16XTokenBlock(size_t k) {
  const size_t whole = XTokenBlock(k);
  return whole >= 128 ? whole : 256;
}

size_t WTileElems(size_t k) {
  return 2 * TileSteps(k) * kTileWords;
}

void PackXTile(const float* const rows[kXTileTokens], size_t k, uint32_t* tile) {
  const size_t blocks = TileSteps(k);
  for (size_t b = 0; b < blocks; ++b)
    for (size_t s = 0; s < kTokens; ++s) {
      const __m512i v =
          rows[s] ? avx512bf16::RowPairs(rows[s], k, b * kStepPairs) : _mm512_setzero_si512();
      _mm512_storeu_si512(tile + (b * kTokens + s) * 16, v);
    }
}

void PackX(const float* xr, size_t ldxr, size_t m, size_t k, uint32_t* xt) {
  const size_t tile_words = TileSteps(k) * kTileWords;
  for (size_t t0 = 0; t0 < m; t0 += kTokens) {
    const float* rows[kTokens];
    for (size_t t = 0; t < kTokens; ++t) rows[t] = t0 + t < m ? xr + (t0 + t) * ldxr : nullptr;
    PackXTile(rows, k, xt + t0 / kTokens * tile_words);
  }
}

void MatMulBf16Panels(const uint32_t* xt, size_t m, const WeightMatrix& w, float* y, size_t ldy,
                      bool accumulate) {
  const size_t k = w.cols, steps = TileSteps(k);
  const size_t panels = (w.rows + kRows - 1) / kRows, tile_words = steps * kTileWords;
  const auto* base = static_cast<const bf16*>(w.data);
  // Token blocks of Bf16XTokenBlock(k), their columns in chunks (as even as the steps allow) of
  // at most the steps whose A tiles stay in L2 while every panel pair passes.
  const size_t mc = Bf16XTokenBlock(k);
  const size_t max_chunk_steps = kXBudget / (mc / kTokens * kTileWords * sizeof(uint32_t));
  const size_t chunks = (steps + max_chunk_steps - 1) / max_chunk_steps;
  const size_t chunk_steps = (steps + chunks - 1) / chunks;
  ConfigureTiles();
  for (size_t t0 = 0; t0 < m; t0 += mc) {
    const size_t t1 = m - t0 < mc ? m : t0 + mc;
    const size_t passes = (t1 - t0 + 2 * kTokens - 1) / (2 * kTokens);
    for (size_t s0 = 0; s0 < steps; s0 += chunk_steps) {
      const size_t s1 = steps - s0 < chunk_steps ? steps : s0 + chunk_steps;
      const size_t chunk_lines = (s1 - s0) * kTileWords * sizeof(uint32_t) / 64;
      const bool last_chunk = s1 == steps;
      for (size_t p = 0; p < panels; p += 2) {
        const size_t np = panels - p >= 2 ? 2 : 1, left = w.rows - p * kRows;
        const size_t rows = left < np * kRows ? left : np * kRows;
        const size_t woff = s0 * 2 * kTileWords;  // the chunk's first step in a panel (bf16)
        const bf16* const panel[2] = {base + p * w.row_stride + woff,
                                      np == 2 ? base + (p + 1) * w.row_stride + woff : nullptr};
        // The next block: the chunk of the next two panels, else of the next chunk's (or token
        // block's) first two.
        NextBlock next;
        size_t q = p + 2, qoff = woff, qlines = chunk_lines;
        if (q >= panels) {
          q = last_chunk && t1 == m ? panels : 0;
          const size_t n0 = last_chunk ? 0 : s1,
                       n1 = n0 + chunk_steps < steps ? n0 + chunk_steps : steps;
          qoff = n0 * 2 * kTileWords;
          qlines = (n1 - n0) * kTileWords * sizeof(uint32_t) / 64;
        }
        for (size_t j = 0; j < 2 && q + j < panels; ++j)
          next.panel[j] = base + (q + j) * w.row_stride + qoff;
        next.lines = qlines;
        next.steps = passes * (s1 - s0);
        for (size_t pass = 0; pass < passes; ++pass) {
          const size_t t = t0 + pass * 2 * kTokens,
                       tokens = t1 - t < 2 * kTokens ? t1 - t : 2 * kTokens;
          kPasses[s0 > 0 || accumulate][tokens > kTokens][np == 2](
              xt + t / kTokens * tile_words + s0 * kTileWords, tile_words, s1 - s0, panel, next,
              pass * (s1 - s0), y + t * ldy + p * kRows, ldy, tokens, rows);
        }
      }
    }
  }
  // Back to the init state: a thread holding tile data makes every context switch save 8 KiB.
  _tile_release();
}

void Bf16TileChains(size_t iterations, float* sink) {
  ConfigureTiles();
  // A = 1.0, B = 2^-63: the sums stay finite and normal.
  alignas(64) uint16_t a[512], b[512];
  for (size_t i = 0; i < 512; ++i) a[i] = 0x3f80, b[i] = 0x2000;
  MOESERVE_TILE_LOAD(6, a, 64);
  MOESERVE_TILE_LOAD(7, b, 64);
  MOESERVE_TILE_ZERO(0);
  MOESERVE_TILE_ZERO(1);
  MOESERVE_TILE_ZERO(2);
  MOESERVE_TILE_ZERO(3);
  MOESERVE_TILE_ZERO(4);
  MOESERVE_TILE_ZERO(5);
  // Six independent accumulators (the instruction's latency is a few of its 16-cycle issue
  // slots), two steps each per round: 12 per round, each 16 · 16 · 32 · 2 flop.
  for (size_t i = 0; i < iterations / kBf16TileChainDivisor; ++i)
    for (int step = 0; step < 2; ++step) {
      MOESERVE_TILE_DP(0, 6, 7);
      MOESERVE_TILE_DP(1, 6, 7);
      MOESERVE_TILE_DP(2, 6, 7);
      MOESERVE_TILE_DP(3, 6, 7);
      MOESERVE_TILE_DP(4, 6, 7);
      MOESERVE_TILE_DP(5, 6, 7);
    }
  alignas(64) float out[256];
  MOESERVE_TILE_STORE(0, out, 64);
  *sink = out[0];
  _tile_release();
}

}  // namespace moeserve::kernels::amx
