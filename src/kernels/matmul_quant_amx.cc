// AMX FP8-block GEMM: e4m3 codes decoded exactly to bf16 (32-row panels, avx512bf16's decoder),
// TDPBF16PS per 128-column scale block, the block's partial sums scaled into f32 totals.
//
// Why: the vdpbf16ps FP8 GEMM is compute-bound, and on Sapphire / Emerald Rapids vdpbf16ps peaks
// below the f32 FMAs (155-178 GFLOP/s on 2 Emerald Rapids threads, where TDPBF16PS measures
// 1900-4600): an FP8 checkpoint's prefill ran at a sixth of the same model in bf16 on the tiles.
//
// Tiles: as the bf16 panel kernel (matmul_bf16_panels_amx.cc): A = 16 tokens × 32 columns of x
// (PackX layout), B = 16 column pairs × 16 weight rows, read straight from the decoded panel
// (GemmBf16's packed layout holds pair p of the panel's 32 rows as 128 contiguous bytes, so rows
// 0-15 and 16-31 of 16 pairs are two tiles of stride 128), C = 16 tokens × 16 rows. A 128-column
// scale block is 4 tile steps (the view's col0 % 32 == 0 puts every block boundary on a step);
// after each block the 4 C tiles are stored and multiplied by their rows' scales into totals in
// L1 (per row: a panel may straddle a 128-row scale boundary in a tensor-parallel slice).
// On 16-row FP8 panels (MatMulFp8Panels) the B tiles come from the panel's codes: decoded for the
// pair's whole k before the passes (avx512bf16::DecodeFp8PanelPairs), or, when one pass covers the
// token block, a step at a time into L1 by the byte tables (fp8_bytes_to_bf16_avx512.h).
//
// Numerics: as avx512bf16::GemmFp8: x rounded to bf16, W's codes exact in bf16, exact products,
// f32 sums per scale block (in the tile unit's order), then one multiply-add by the block scale.
#include <immintrin.h>

#include <cstdint>

#include "kernels/amx_tiles.h"
#include "kernels/even_spread.h"
#include "kernels/fp8_bytes_to_bf16_avx512.h"
#include "kernels/fp8_panels.h"
#include "kernels/internal.h"

namespace moeserve::kernels::amx {
namespace {

constexpr size_t kPanel = 32;  // weight rows per decoded panel: two B tiles
constexpr size_t kTokens = kXTileTokens;
constexpr size_t kScaleBlock = 128;

// The next panel's codes (rows × lines of 64 bytes), requested into L2 a share per tile step of
// the current panel's passes: the decode then reads them from L2, not at one core's demand rate
// from memory.
struct NextCodes {
  const uint8_t* codes = nullptr;  // null: nothing to request
  size_t stride = 0, rows = 0, lines = 0, steps = 1;

  // The requests of steps `first`, first + 1, ... in order: one line cursor walking the rows.
  class Cursor {
   public:
    Cursor(const NextCodes& next, size_t first) : next_(next) {
      if (!next.codes) return;
      spread_ = EvenSpread(next.rows * next.lines, next.steps, first);
      row_ = spread_.position() / next.lines;
      col_ = spread_.position() % next.lines;
    }
    [[gnu::always_inline]] void Request() {
      if (!next_.codes) return;
      const EvenSpread::Range r = spread_.Next();
      for (size_t l = r.begin; l < r.end; ++l) {
        _mm_prefetch(reinterpret_cast<const char*>(next_.codes + row_ * next_.stride + col_ * 64),
                     _MM_HINT_T1);
        if (++col_ == next_.lines) col_ = 0, ++row_;
      }
    }

   private:
    const NextCodes& next_;
    EvenSpread spread_;
    size_t row_ = 0, col_ = 0;
  };
};

// A fused pass's codes, read ahead of its decode into L2 (each panel's step: 32 columns of 16
// rows), as the vdpbf16ps GEMV does: the hardware prefetchers alone kept one core at ~7.5 GB/s.
constexpr size_t kStepBytes = 2 * kStepPairs * kFp8PanelRows;
constexpr size_t kAhead = 4096;

// totals[t][0..16) += C tile `kTile` row t · s, t < tokens (≤ 16; the tile's other rows are
// padding: a decode step's 1-3 tokens drain 1-3 rows, not 16).
template <int kTile>
inline void ScaleInto(float (*totals)[kPanel], __m512 s, float* buf, size_t tokens) {
  MOESERVE_TILE_STORE_N(kTile, buf, 64);
  for (size_t t = 0; t < tokens; ++t)
    _mm512_store_ps(totals[t],
                    _mm512_fmadd_ps(_mm512_load_ps(buf + t * 16), s, _mm512_load_ps(totals[t])));
}

// Where a pass finds its B tiles: step st's tile of rows 16h .. 16h + 15 at
// base + st · step_words + h · half_words, tile rows `stride` bytes apart.
struct BTiles {
  const uint32_t* base;
  size_t step_words, half_words, stride;
};

// One pass: TA token tiles (xa, the second at xa + xstride) × TB 16-row halves of the decoded
// rows, block by block (block b = tile steps [bounds[b], bounds[b + 1]), row scales at
// scales + 32 b), into y (tokens × rows).
// `fused` (a kFp8Panel view's only pass over a panel pair: at most 32 tokens): each step's B tiles
// are decoded from `panel` (k columns, 16 rows each) into L1 just before their tile loads, instead
// of the pair's whole k decoded beforehand into `wt` and read back from L2.
template <int TA, int TB>
void Fp8Pass(const uint32_t* xa, size_t xstride, const BTiles& wt, const size_t* bounds,
             size_t blocks, const float* scales, const NextCodes& next, size_t step0, float* y,
             size_t ldy, size_t tokens, size_t rows, bool accumulate, const uint8_t* const* panel,
             size_t k) {
  alignas(64) uint32_t step_tiles[2 * kTileWords];
  const bool fused = panel != nullptr;
  const AffineDecoder d;
  alignas(64) float totals[2 * kTokens][kPanel];
  for (size_t t = 0; t < tokens; ++t) {  // rows past `tokens` are never read
    _mm512_store_ps(totals[t], _mm512_setzero_ps());
    _mm512_store_ps(totals[t] + 16, _mm512_setzero_ps());
  }
  alignas(64) float buf[kTokens * 16];
  NextCodes::Cursor requests(next, step0);
  const size_t t0 = tokens < kTokens ? tokens : kTokens;  // tokens of the first token tile
  for (size_t b = 0; b < blocks; ++b) {
    MOESERVE_TILE_ZERO(0);
    if (TB == 2) MOESERVE_TILE_ZERO(1);
    if (TA == 2) MOESERVE_TILE_ZERO(2);
    if (TA == 2 && TB == 2) MOESERVE_TILE_ZERO(3);
    for (size_t st = bounds[b]; st < bounds[b + 1]; ++st) {
      requests.Request();
      const uint32_t* wb = wt.base + st * wt.step_words;
      size_t half = wt.half_words, stride = wt.stride;
      if (fused) {
        // A copy per step: GCC kept `d` itself in memory (the tile asm's memory clobbers) and
        // read its six tables back for every 64 codes; the copy's live in registers.
        const AffineDecoder dl = d;
        for (size_t h = 0; h < TB; ++h) {
          const char* ahead = reinterpret_cast<const char*>(panel[h]) + st * kStepBytes + kAhead;
#pragma GCC unroll 8
          for (size_t l = 0; l < kStepBytes; l += 64) _mm_prefetch(ahead + l, _MM_HINT_T1);
        }
        DecodeStep(dl, panel[0], st, k, step_tiles);
        if (TB == 2) DecodeStep(dl, panel[1], st, k, step_tiles + kTileWords);
        wb = step_tiles, half = kTileWords, stride = 64;
      }
      MOESERVE_TILE_LOAD(4, xa + st * kTileWords, 64);
      MOESERVE_TILE_LOAD(6, wb, stride);
      MOESERVE_TILE_DP(0, 4, 6);
      if (TB == 2) {
        MOESERVE_TILE_LOAD(7, wb + half, stride);
        MOESERVE_TILE_DP(1, 4, 7);
      }
      if (TA == 2) {
        MOESERVE_TILE_LOAD(5, xa + xstride + st * kTileWords, 64);
        MOESERVE_TILE_DP(2, 5, 6);
        if (TB == 2) MOESERVE_TILE_DP(3, 5, 7);
      }
    }
    const __m512 s0 = _mm512_load_ps(scales + b * kPanel);
    const __m512 s1 = _mm512_load_ps(scales + b * kPanel + 16);
    ScaleInto<0>(totals, s0, buf, t0);
    if (TB == 2) ScaleInto<1>(reinterpret_cast<float(*)[kPanel]>(totals[0] + 16), s1, buf, t0);
    if (TA == 2) {
      ScaleInto<2>(totals + kTokens, s0, buf, tokens - kTokens);
      if (TB == 2)
        ScaleInto<3>(reinterpret_cast<float(*)[kPanel]>(totals[kTokens] + 16), s1, buf,
                     tokens - kTokens);
    }
  }
  const __mmask16 m0 = rows >= 16 ? __mmask16(0xffff) : __mmask16((1u << rows) - 1);
  const __mmask16 m1 = rows >= 32   ? __mmask16(0xffff)
                       : rows <= 16 ? __mmask16(0)
                                    : __mmask16((1u << (rows - 16)) - 1);
  for (size_t t = 0; t < tokens; ++t) {
    float* yt = y + t * ldy;
    __m512 v0 = _mm512_load_ps(totals[t]), v1 = _mm512_load_ps(totals[t] + 16);
    if (accumulate) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, yt));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, yt + 16));
    }
    _mm512_mask_storeu_ps(yt, m0, v0);
    if (m1) _mm512_mask_storeu_ps(yt + 16, m1, v1);
  }
}

using PassFn = void (*)(const uint32_t*, size_t, const BTiles&, const size_t*, size_t, const float*,
                        const NextCodes&, size_t, float*, size_t, size_t, size_t, bool,
                        const uint8_t* const*, size_t);
constexpr PassFn kPasses[2][2] = {{Fp8Pass<1, 1>, Fp8Pass<1, 2>}, {Fp8Pass<2, 1>, Fp8Pass<2, 2>}};

// Scale blocks a view of at most kMaxFp8Cols columns touches, at any col0.
constexpr size_t kMaxBlocks = 128;
static_assert(kMaxFp8Cols / kScaleBlock + 2 <= kMaxBlocks);

// Scale block b of a view at col0 covers tile steps [bounds[b], bounds[b + 1]) (col0 % 32 == 0:
// boundaries fall on steps; the last may end inside one, past k the weights and x are zero).
// Returns the block count.
size_t StepBounds(size_t col0, size_t k, size_t* bounds) {
  size_t blocks = 0;
  bounds[0] = 0;
  for (size_t a = 0; a < k; ++blocks) {
    if (blocks == kMaxBlocks) __builtin_trap();  // the callers check k against kMaxFp8Cols
    const size_t end = (col0 + a) / kScaleBlock * kScaleBlock + kScaleBlock - col0;
    a = end < k ? end : k;
    bounds[blocks + 1] = (a + 2 * kStepPairs - 1) / (2 * kStepPairs);
  }
  return blocks;
}

}  // namespace

size_t Fp8PackElems(size_t k) {
  return TileSteps(k) * kStepPairs * kPanel * 2;
}

size_t Fp8ScaleFloats(size_t k) {
  return kPanel * (k / kScaleBlock + 2);
}

void PackXBf16(const bf16* xb, size_t ldxb, size_t m, size_t k, uint32_t* xt) {
  const size_t steps = TileSteps(k), tile_words = steps * kTileWords;
  for (size_t t = 0; t < (m + kTokens - 1) / kTokens * kTokens; ++t) {
    uint32_t* tile = xt + t / kTokens * tile_words + (t % kTokens) * 16;
    for (size_t st = 0; st < steps; ++st) {
      const size_t c0 = st * 2 * kStepPairs, left = k - c0;
      const __mmask32 mask = t >= m       ? __mmask32(0)
                             : left >= 32 ? __mmask32(0xffffffffu)
                                          : __mmask32((1u << left) - 1);
      const bf16* row = t < m ? xb + t * ldxb + c0 : xb;  // padding tokens load nothing
      _mm512_storeu_si512(tile + st * kTileWords, _mm512_maskz_loadu_epi16(mask, row));
    }
  }
}

void GemmFp8(const uint32_t* xt, size_t m, const QuantRows& w, float* y, size_t ldy,
             bool accumulate, bf16* pack, float* scales) {
  const size_t k = w.k, pairs = (k + 1) / 2, steps = TileSteps(k), tile_words = steps * kTileWords;
  size_t bounds[kMaxBlocks + 1];
  const size_t blocks = StepBounds(w.col0, k, bounds);
  const float* block_scales = static_cast<const float*>(w.scales);
  const size_t first_blk = w.col0 / kScaleBlock, lines = (k + 63) / 64;
  // GemmBf16's packed layout: pair p of the panel's 32 rows in 128 bytes.
  const BTiles wt{reinterpret_cast<const uint32_t*>(pack), kStepPairs * kPanel, 16, 128};
  const size_t mc = XTokenBlock(k);
  ConfigureTiles();
  for (size_t t0 = 0; t0 < m; t0 += mc) {
    const size_t t1 = m - t0 < mc ? m : t0 + mc;
    const size_t passes = (t1 - t0 + 2 * kTokens - 1) / (2 * kTokens);
    for (size_t n = 0; n < w.rows; n += kPanel) {
      const size_t nr = w.rows - n < kPanel ? w.rows - n : kPanel;
      avx512bf16::DecodeFp8Panel(w, n, nr, pack);
      // The pairs of the last step past k: zero (the decoder writes pairs below ceil(k / 2)).
      for (size_t p = pairs; p < steps * kStepPairs; ++p) {
        _mm512_store_si512(pack + p * kPanel * 2, _mm512_setzero_si512());
        _mm512_store_si512(pack + p * kPanel * 2 + 32, _mm512_setzero_si512());
      }
      for (size_t b = 0; b < blocks; ++b)
        for (size_t j = 0; j < kPanel; ++j)
          scales[b * kPanel + j] =
              j < nr
                  ? block_scales[((w.row0 + n + j) / kScaleBlock) * w.scale_stride + first_blk + b]
                  : 0.0f;
      // The next panel of this token block, else the first of the next one.
      NextCodes next;
      const size_t nn = n + kPanel < w.rows ? n + kPanel : (t1 < m ? 0 : w.rows);
      if (nn < w.rows) {
        next.codes = w.codes + nn * w.row_stride;
        next.stride = w.row_stride;
        next.rows = w.rows - nn < kPanel ? w.rows - nn : kPanel;
        next.lines = lines;
        next.steps = passes * steps;
      }
      for (size_t pass = 0; pass < passes; ++pass) {
        const size_t t = t0 + pass * 2 * kTokens;
        const size_t tokens = t1 - t < 2 * kTokens ? t1 - t : 2 * kTokens;
        kPasses[tokens > kTokens][nr > 16](xt + t / kTokens * tile_words, tile_words, wt, bounds,
                                           blocks, scales, next, pass * steps, y + t * ldy + n, ldy,
                                           tokens, nr, accumulate, nullptr, k);
      }
    }
  }
  _tile_release();
}

void MatMulFp8Panels(const uint32_t* xt, size_t m, const WeightMatrix& w, float* y, size_t ldy,
                     bool accumulate, uint32_t* wb, float* scales) {
  const size_t k = w.cols, steps = TileSteps(k), tile_words = steps * kTileWords;
  const size_t panels = (w.rows + kFp8PanelRows - 1) / kFp8PanelRows;
  size_t bounds[kMaxBlocks + 1];
  const size_t blocks = StepBounds(w.col0, k, bounds);
  const auto* codes = static_cast<const uint8_t*>(w.data);
  const auto* table = static_cast<const float*>(w.scales);
  // The decoded pair of panels: one B tile per step and panel, the second panel's after the first.
  const BTiles wt{wb, kTileWords, tile_words, 64};
  const size_t mc = XTokenBlock(k), lines = (k * kFp8PanelRows + 63) / 64;
  // Fewer tokens than a tile (decode steps): A and C tiles of just their rows, so each step
  // neither loads A's 16 rows (from L2: a 3072-column x is 96 KiB of tiles) nor multiplies padding.
  ConfigureTiles(m < kTokens ? m : kTokens);
  for (size_t t0 = 0; t0 < m; t0 += mc) {
    const size_t t1 = m - t0 < mc ? m : t0 + mc;
    const size_t passes = (t1 - t0 + 2 * kTokens - 1) / (2 * kTokens);
    for (size_t p = 0; p < panels; p += 2) {
      const size_t np = panels - p >= 2 ? 2 : 1, left = w.rows - p * kFp8PanelRows;
      const size_t rows = left < np * kFp8PanelRows ? left : np * kFp8PanelRows;
      const uint8_t* const panel[2] = {codes + p * w.row_stride,
                                       codes + (p + np - 1) * w.row_stride};
      // One pass (at most 32 tokens: decode steps, MoE experts' few rows) decodes each step's B
      // tiles just before their loads (L1) instead of the pair's whole k beforehand (written to
      // and read back from L2): bench_quant --gemm-m 16, 3 alternating rounds: 1.14-1.7x.
      const bool fused = passes == 1;
      for (size_t h = 0; h < np; ++h) {
        if (!fused)
          avx512bf16::DecodeFp8PanelPairs(codes + (p + h) * w.row_stride, k, wb + h * tile_words);
        // Row r of panel p + h in block b: the panel's table entry [b][r] (padding rows 0).
        for (size_t b = 0; b < blocks; ++b)
          _mm512_store_ps(scales + b * kPanel + h * 16,
                          _mm512_loadu_ps(table + (p + h) * w.scale_stride + b * 16));
      }
      if (np == 1)
        for (size_t b = 0; b < blocks; ++b)
          _mm512_store_ps(scales + b * kPanel + 16, _mm512_setzero_ps());
      // The next pair's codes (each panel one sequential run), else the first of the next block,
      // where the pair's whole k is decoded before its passes (a burst at one core's demand rate
      // otherwise). Not for a fused pass: its step-by-step decode streams the codes in order, and
      // the hardware prefetchers keep up; the requests cost more than they saved (in-process A/B,
      // one thread: 1.30x faster without them at 1-3 tokens from L2, 1.03-1.10x from DRAM with a
      // second process streaming beside it; at 64 and 128 tokens 0.85-0.90x without).
      NextCodes next;
      const size_t q = p + 2 < panels ? p + 2 : (t1 < m ? 0 : panels);
      if (q < panels && !fused) {
        next.codes = codes + q * w.row_stride;
        next.stride = w.row_stride;
        next.rows = panels - q >= 2 ? 2 : 1;
        next.lines = lines;
        next.steps = passes * steps;
      }
      for (size_t pass = 0; pass < passes; ++pass) {
        const size_t t = t0 + pass * 2 * kTokens;
        const size_t tokens = t1 - t < 2 * kTokens ? t1 - t : 2 * kTokens;
        kPasses[tokens > kTokens][np == 2](xt + t / kTokens * tile_words, tile_words, wt, bounds,
                                           blocks, scales, next, pass * steps,
                                           y + t * ldy + p * kFp8PanelRows, ldy, tokens, rows,
                                           accumulate, fused ? panel : nullptr, k);
      }
    }
  }
  _tile_release();
}

}  // namespace moeserve::kernels::amx
