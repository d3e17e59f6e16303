// AVX-512 GEMV (m < 8) over FP8 weights in 16-row panels (fp8_panels.h), on f32 FMAs: the AVX2
// panel kernel's arithmetic with a whole panel column in one register. A column's 16 codes become
// 16 f32 weights in a broadcast load, a byte shuffle, a shift, a mask and one vcvtph2ps
// (e4m3_half_bits.h), one FMA per token.
// Below it, the avx512 table's GEMM (MatMulFp8Panels, 8 tokens and more): blocks of panels
// decoded to f32 once per call and swept by the f32 register tile of f32_panel_tile_avx512.h
// (panel_schedule.h), each scale block's sums scaled as the block ends, as here.
//
// Why: the avx512 table's FP8 GEMV (AVX-512 without BF16: every view below 8 tokens), and the amx
// table's for the views its other kernels do not take: 1 and 2 tokens go to
// amx::GemvFp8Panels (byte-table decode, vdpbf16ps) when the view starts on a 4-column group, 3 and
// more to the tile unit when it starts on a 32-column step (every real tensor-parallel split
// does); the rest runs here. On these cores vdpbf16ps runs at half the f32 FMA rate, and the AVX2
// kernel needs two conversions, an extract and two FMAs per column and token, and only 16
// registers (3 tokens at most per pass).
//
// Numerics: per lane (row), exactly the AVX2 kernel's: a running sum from y (a call that adds into
// y) or zero; per 128-column scale block Σ x · (e4m3 · 2^-8) in column order, then sum += (Σ ·
// 256) · scale. So the results equal the AVX2 path's bit for bit at any m, and a panel's sums are
// the same alone or paired (y does not depend on how rows were split over threads). The GEMM
// below does the same (its block sums times scale · 256: the same product exactly). The affine
// kernel (matmul_fp8_panels_avx512_gfni.cc) sums e4m3 values, not · 2^-8: the same bits unless a
// partial sum falls below 2^-118.
#include <immintrin.h>

#include <cstdint>

#include "kernels/e4m3_half_bits.h"
#include "kernels/f32_panel_tile_avx512.h"
#include "kernels/fp8_panels.h"
#include "kernels/internal.h"
#include "kernels/panel_schedule.h"

namespace moeserve::kernels::avx512 {
namespace {

constexpr size_t kRows = kFp8PanelRows;

// Column of 16 codes → e4m3 · 2^-8 as f32 (through fp16 bits, e4m3_half_bits.h), lane r = row r.
inline __m512 DecodeColumn(const uint8_t* col) {
  return _mm512_cvtph_ps(E4m3HalfBits16At(col));
}

inline void Prefetch(const uint8_t* col) {
  _mm_prefetch(reinterpret_cast<const char*>(col) + 4096, _MM_HINT_T0);
}

// A panel's running sums at the start of a call over `rows` rows of y: y's own values when the
// call adds into y, else zero.
inline __m512 StartSums(const float* y, size_t rows, bool accumulate) {
  return accumulate ? _mm512_maskz_loadu_ps(TailMask16(rows), y) : _mm512_setzero_ps();
}

inline void Store(float* y, __m512 v, size_t rows) {
  _mm512_mask_storeu_ps(y, TailMask16(rows), v);
}

// M tokens (rows of xr, ld apart) × one panel (`rows` of its 16 stored).
template <int M>
void Tile(const float* xr, size_t ld, const uint8_t* panel, const float* scales, size_t k,
          size_t col0, float* y, size_t ldy, size_t rows, bool accumulate) {
  __m512 acc[M];
  for (int t = 0; t < M; ++t) acc[t] = StartSums(y + t * ldy, rows, accumulate);
  const __m512 k256 = _mm512_set1_ps(256.0f);
  ForEachFp8ScaleBlock(col0, 0, k, [&](size_t c0, size_t c1, size_t b) {
    __m512 s[M];
    for (int t = 0; t < M; ++t) s[t] = _mm512_setzero_ps();
    for (size_t i = c0; i < c1; ++i) {
      if (i % 4 == 0) Prefetch(panel + i * kRows);
      const __m512 w = DecodeColumn(panel + i * kRows);
      for (int t = 0; t < M; ++t) s[t] = _mm512_fmadd_ps(_mm512_set1_ps(xr[t * ld + i]), w, s[t]);
    }
    const __m512 sc = _mm512_loadu_ps(scales + b * kRows);
    for (int t = 0; t < M; ++t) acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(s[t], k256), sc, acc[t]);
  });
  for (int t = 0; t < M; ++t) Store(y + t * ldy, acc[t], rows);
}

// One token against two full panels at once, each with Tile<1>'s arithmetic: two streams for the
// hardware prefetchers and two independent FMA chains.
void Pair1(const float* x, const uint8_t* p, const float* sp, const uint8_t* q, const float* sq,
           size_t k, size_t col0, float* yp, float* yq, bool accumulate) {
  __m512 ap = StartSums(yp, kRows, accumulate), aq = StartSums(yq, kRows, accumulate);
  const __m512 k256 = _mm512_set1_ps(256.0f);
  ForEachFp8ScaleBlock(col0, 0, k, [&](size_t c0, size_t c1, size_t b) {
    __m512 s = _mm512_setzero_ps(), t = s;
    for (size_t i = c0; i < c1; ++i) {
      if (i % 4 == 0) {
        Prefetch(p + i * kRows);
        Prefetch(q + i * kRows);
      }
      const __m512 xv = _mm512_set1_ps(x[i]);
      s = _mm512_fmadd_ps(xv, DecodeColumn(p + i * kRows), s);
      t = _mm512_fmadd_ps(xv, DecodeColumn(q + i * kRows), t);
    }
    ap = _mm512_fmadd_ps(_mm512_mul_ps(s, k256), _mm512_loadu_ps(sp + b * kRows), ap);
    aq = _mm512_fmadd_ps(_mm512_mul_ps(t, k256), _mm512_loadu_ps(sq + b * kRows), aq);
  });
  Store(yp, ap, kRows);
  Store(yq, aq, kRows);
}

// M tokens × P decoded panel blocks (pack[p]: columns [k0, k0 + kc) of 16 f32, e4m3 · 2^-8 as
// DecodeColumn gives them; their ends are scale block ends) on the f32 register tile: per scale
// block, the tile's sums from zero over the block's columns, then scaled into the rows' running
// sums. Those start from y when it holds them at column k0 (from_y: a later column block, or a call
// that adds into y), else from zero, stay in an L1 array between the call's scale blocks, and end
// in y. Why not in y between blocks: a token's rows of y lie ldy floats apart (3072 = 12 KiB: one
// L1 set), and the same steps through y measured 2-3% slower ([1536 x 3072] at 512 tokens, [3072 x
// 1536] at 128, one core, calls alternating in one process). Against scaling each weight as it is
// decoded (the order before it, not batch-invariant): 1.03x the time at 512 and 128 tokens,
// 0.96-1.02x at 17-32.
//
// kDecode: the block's first token tile decodes the columns from the panels' codes (codes[p], at
// column 0 of the view) and stores them into pack[p] as it multiplies them; the later tiles load
// them from there. Against decoding the whole block before its first tile (a loop of decodes and
// stores with no FMAs for the code loads' misses to hide behind), one core, calls alternating in
// one process, the same bits: [3072 x 1536] at 128 tokens (a prefill's expert) 0.96x the time,
// [1536 x 3072] at 24 0.87x, [6144 x 3072] at 48 0.94x, at 512 1.00x.
//
// Each column of a panel is one 64-byte line of the block, in L2 or (the small-x order) L1; the
// hardware prefetchers follow the P streams (with the 12 x 2 tile, 16 columns requested ahead
// had gained 4%; with 6 x 4, whose loads each feed half the FMAs, the requests cost 2-3%).
template <int M, int P, bool kDecode>
void PackTile(const uint8_t* const* codes, const float* x0, const float* x1, float* const* pack,
              const float* const* scales, size_t col0, size_t k0, size_t kc, float* y, size_t ldy,
              const size_t* rows, bool from_y) {
  constexpr size_t kSumsLd = P * kRows;
  alignas(64) float sums[M * kSumsLd];
  ForEachFp8ScaleBlock(col0, k0, k0 + kc, [&](size_t c0, size_t c1, size_t b) {
    F32PanelTile<M, P> tile;
    for (size_t c = c0 - k0; c < c1 - k0; ++c) {
      __m512 w[P];
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        if constexpr (kDecode) {
          w[p] = DecodeColumn(codes[p] + (k0 + c) * kRows);
          _mm512_store_ps(pack[p] + c * kRows, w[p]);
        } else {
          w[p] = _mm512_load_ps(pack[p] + c * kRows);
        }
      }
      tile.Column(x0, x1, c, w);
    }
    __m512 scale[P];  // (Σ x · e4m3 · 2^-8) · (scale · 256): Tile's (Σ · 256) · scale exactly
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p)
      scale[p] = _mm512_mul_ps(_mm512_loadu_ps(scales[p] + b * kRows), _mm512_set1_ps(256.0f));
    const bool first = c0 == k0, last = c1 == k0 + kc;
    const float* from = !first ? sums : from_y ? y : nullptr;
    tile.ScaleInto(scale, from, first ? ldy : kSumsLd, last ? y : sums, last ? ldy : kSumsLd, rows);
  });
}

// Register tiles of 6 tokens (one x tile) x 4 panels: per column 4 weight loads and 6 broadcasts
// feed 24 FMAs, where the bf16 kernel's 12 x 2 tile takes 2 + 12 (its weights need a widening op
// per column and panel, on the FMA ports: 6 x 4 doubles those, and measured 1.05-1.08x its time).
// One core (Ice Lake), calls alternating in one process, the same bits, against 12 x 2 with its
// prefetch: [1536 x 3072] at 512 / 24 tokens 0.92x the time, [3072 x 1536] at 512 / 128 0.93 /
// 0.94x, [6144 x 3072] at 64 0.91x; the tile alone in L1 (a scratch loop, medians of 40 rounds
// against an FMA-only probe) 89% of the probe's rate against 81%.
constexpr size_t kGroupPanels = 4, kGroupTokens = kXTileTokens;
constexpr auto kPackTiles =
    TileTable<kGroupPanels, kGroupTokens>([]<int M, int P>() { return &PackTile<M, P, false>; });
constexpr auto kDecodeTiles =
    TileTable<kGroupPanels, kGroupTokens>([]<int M, int P>() { return &PackTile<M, P, true>; });

// Decoded blocks of 256 columns x 32 panels (512 KiB of f32) stay in L2 while the register tiles
// sweep them (panel_schedule.h). Up to kPanelGroupOrderMaxTokens tokens the GEMM takes
// ForEachPanelGroupTile's order instead: one panel group's block at a time, every token tile over
// it before the next, rather than 32 panels' blocks into L2 for tiles that then find them there
// (one core, [6144 x 3072] from DRAM, calls alternating in one process, with the 12 x 2 tile and a
// pair's 256 columns: 17 / 24 / 32 / 64 tokens 0.87 / 0.88 / 0.91 / 0.93x the time, the same
// bits). There a block is a 4-panel group's 128 columns (32 KiB), which stays in L1 for the token
// tiles after the first: against 256 columns (64 KiB), 17 / 20 / 32 tokens 0.96 / 0.94 / 0.98x
// the time, 48 / 64 within 2% (measured while the GEMM took FP8 views from 17 tokens on VBMI /
// GFNI cores, 15 on the others; now from 8 or 10, Avx512Fp8PanelRows).
constexpr size_t kPackCols = 256, kBlockPanels = (512 << 10) / (kPackCols * kRows * sizeof(float));
constexpr size_t kGroupPackCols = 128;
static_assert(kBlockPanels % kGroupPanels == 0 && kPackCols % kFp8ScaleBlock == 0 &&
              kGroupPackCols % kFp8ScaleBlock == 0 && kGroupPackCols <= kPackCols);

using TileFn = void (*)(const float*, size_t, const uint8_t*, const float*, size_t, size_t, float*,
                        size_t, size_t, bool);
constexpr TileFn kTiles[8] = {nullptr, Tile<1>, Tile<2>, Tile<3>,
                              Tile<4>, Tile<5>, Tile<6>, Tile<7>};

}  // namespace

void GemvFp8Panels(const float* xr, size_t ld, size_t m, const WeightMatrix& w, float* y,
                   size_t ldy, bool accumulate) {
  const size_t k = w.cols, panels = (w.rows + kRows - 1) / kRows;
  const auto* codes = static_cast<const uint8_t*>(w.data);
  const auto* scales = static_cast<const float*>(w.scales);
  size_t first = 0;  // panels before it are done
  if (m == 1)
    first = ForEachFullFp8PanelPair(w, [&](size_t p, size_t q) {
      Pair1(xr, codes + p * w.row_stride, scales + p * w.scale_stride, codes + q * w.row_stride,
            scales + q * w.scale_stride, k, w.col0, y + p * kRows, y + q * kRows, accumulate);
    });
  for (size_t p = first; p < panels; ++p) {
    const size_t rows = w.rows - p * kRows < kRows ? w.rows - p * kRows : kRows;
    kTiles[m](xr, ld, codes + p * w.row_stride, scales + p * w.scale_stride, k, w.col0,
              y + p * kRows, ldy, rows, accumulate);
  }
}

size_t Fp8PanelPackFloats() {
  return kBlockPanels * kPackCols * kRows;
}

void MatMulFp8Panels(const float* xp, size_t m, const WeightMatrix& w, float* y, size_t ldy,
                     bool accumulate, float* pack) {
  const size_t k = w.cols, panels = (w.rows + kRows - 1) / kRows;
  const auto* codes = static_cast<const uint8_t*>(w.data);
  const auto* scales = static_cast<const float*>(w.scales);
  auto rows_of = [&](size_t p) { return w.rows - p * kRows < kRows ? w.rows - p * kRows : kRows; };
  // Each block is decoded once per call, by its first token tile, then every later tile sweeps it.
  // Column blocks end on the weight's scale blocks (a block sum is scaled as its block ends). Up to
  // kPanelGroupOrderMaxTokens tokens a block is one panel group's (ForEachPanelGroupTile's order,
  // as the bf16 GEMM).
  const auto tile = [&](size_t t, size_t tokens, size_t k0, size_t kc, size_t p, size_t n,
                        size_t first) {
    const uint8_t* panel_codes[kGroupPanels];
    float* packs[kGroupPanels];
    const float* panel_scales[kGroupPanels];
    size_t rows[kGroupPanels];
    for (size_t q = 0; q < kGroupPanels; ++q) {
      const size_t pq = p + (q < n ? q : 0);
      panel_codes[q] = codes + pq * w.row_stride;
      packs[q] = pack + (pq - first) * kPackCols * kRows;
      panel_scales[q] = scales + pq * w.scale_stride;
      rows[q] = q < n ? rows_of(p + q) : 0;
    }
    const float* x0 = xp + t * k + k0 * kXTileTokens;  // one x tile: the tile reads no x1
    (t == 0 ? kDecodeTiles : kPackTiles)[n][tokens](panel_codes, x0, x0, packs, panel_scales,
                                                    w.col0, k0, kc, y + t * ldy + p * kRows, ldy,
                                                    rows, accumulate || k0 > 0);
  };
  const size_t off_block = w.col0 % kFp8ScaleBlock;
  if (m <= kPanelGroupOrderMaxTokens)
    ForEachPanelGroupTile<kGroupPanels, kGroupTokens>(m, k, panels, kGroupPackCols, tile,
                                                      kGroupPackCols - off_block);
  else
    ForEachPanelBlockTile<kGroupPanels, kGroupTokens>(m, k, panels, kPackCols, kBlockPanels, tile,
                                                      kPackCols - off_block);
}

}  // namespace moeserve::kernels::avx512
