// AVX2 + FMA + F16C MatMul over FP8 weights repacked in 16-row panels (fp8_panels.h). A column's
// 16 codes become 16 f32 weights in a broadcast load, a byte shuffle, a shift, a mask, a store
// and two vcvtph2ps from it (e4m3_half_bits.h).
// Up to 6 tokens: codes decoded in the register tile. More tokens: a block of panels decoded once
// per call into f32 panels (by the block's first token tile) and swept by a register tile of 6
// tokens for every tile of tokens (panel_schedule.h).
//
// Numerics, every path (the GEMM's too, so a token's y does not depend on its batch): per row, a
// running sum that starts at y when the call adds into y and at zero otherwise; per 128-column
// scale block, Σ x · (e4m3 · 2^-8) over the block's columns in order, then sum += (Σ · 256) ·
// scale (one FMA).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/e4m3_half_bits.h"
#include "kernels/fp8_panels.h"
#include "kernels/internal.h"
#include "kernels/panel_schedule.h"
#include "kernels/simd_math_avx2.h"

namespace moeserve::kernels::avx2 {
namespace {

constexpr size_t kRows = kFp8PanelRows;
constexpr size_t kTile = kPackedXTile;

// Column of 16 codes → e4m3 · 2^-8 as f32 (through fp16 bits, e4m3_half_bits.h), rows 0..7 (lo)
// and 8..15 (hi). The fp16 bits go through a 32-byte buffer in L1 and are converted from there
// (CvtPhPsFromMemory): the decode is what bounds the GEMV at one token on Intel's three vector
// ports, and the store and two loads take none of them where the extract and the register-form
// conversions took three shuffle-port uops. One core (Ice Lake), [1536 x 3072] at one token,
// the two forms alternating in one process: from the LLC 14.4 -> 17.0 GB/s (best runs), from
// DRAM 12.7-13.0 -> 14.0-14.6; the same bits.
inline void DecodeColumn(const uint8_t* col, __m256& lo, __m256& hi) {
  alignas(32) uint16_t half[16];
  _mm256_store_si256(reinterpret_cast<__m256i*>(half), E4m3HalfBits16At(col));
  lo = CvtPhPsFromMemory(half);
  hi = CvtPhPsFromMemory(half + 8);
}

inline void Prefetch(const uint8_t* col) {
  _mm_prefetch(reinterpret_cast<const char*>(col) + 4096, _MM_HINT_T0);
}

// Half h (rows 8h..8h+7) of a panel's running sums at the start of a call over `rows` rows of y:
// y's own values when the call adds into y, else zero.
inline __m256 StartSums(const float* y, size_t rows, int h, bool accumulate) {
  const size_t n = h == 0 ? rows : rows > 8 ? rows - 8 : 0;
  return accumulate && n > 0 ? LoadMasked(y + 8 * h, n) : _mm256_setzero_ps();
}

// y[0, rows) = sum (two halves).
inline void StoreSums(float* y, __m256 lo, __m256 hi, size_t rows) {
  StoreMasked(y, lo, rows, false);
  if (rows > 8) StoreMasked(y + 8, hi, rows - 8, false);
}

// M ≤ 6 tokens (one packed x tile) × a panel's 16 rows over all columns. Per scale block:
// Σ x · (e4m3 · 2^-8) in registers, then acc += (sum · 256) · scale. The block sums take 2M of
// the 16 registers; up to 3 tokens the accumulators stay in registers too, from 4 in an L1 array
// (touched once per 128 columns). Why up to 6 here and not the decoded-panel GEMM from 4: each
// column is decoded once for all M tokens either way, but the GEMM writes and rereads the f32
// panel (4 bytes per weight). One core (Ice Lake), [1536 x 3072] from DRAM, the two kernels
// alternating in one process (medians): 4 tokens 1.73 -> 1.17 ms, 6 tokens 1.99 -> 1.48 ms.
template <int M>
void SmallTile(const float* xp, const uint8_t* panel, const float* scales, size_t k, size_t col0,
               float* y, size_t ldy, size_t rows, bool accumulate) {
  static_assert(M >= 1 && M <= int(kTile));
  constexpr bool kAccInRegisters = M <= 3;
  __m256 acc[kAccInRegisters ? M : 1][2];
  alignas(32) float acc_mem[kAccInRegisters ? 1 : M][kRows];
  for (int t = 0; t < M; ++t) {
    const __m256 a0 = StartSums(y + t * ldy, rows, 0, accumulate),
                 a1 = StartSums(y + t * ldy, rows, 1, accumulate);
    if constexpr (kAccInRegisters) {
      acc[t][0] = a0, acc[t][1] = a1;
    } else {
      _mm256_store_ps(acc_mem[t], a0);
      _mm256_store_ps(acc_mem[t] + 8, a1);
    }
  }
  const __m256 k256 = _mm256_set1_ps(256.0f);
  ForEachFp8ScaleBlock(col0, 0, k, [&](size_t c0, size_t c1, size_t b) {
    __m256 s[M][2];
    for (int t = 0; t < M; ++t) s[t][0] = s[t][1] = _mm256_setzero_ps();
    for (size_t i = c0; i < c1; ++i) {
      if (i % 4 == 0) Prefetch(panel + i * kRows);
      __m256 w0, w1;
      DecodeColumn(panel + i * kRows, w0, w1);
      for (int t = 0; t < M; ++t) {
        const __m256 xv = _mm256_broadcast_ss(xp + i * kTile + t);
        s[t][0] = _mm256_fmadd_ps(xv, w0, s[t][0]);
        s[t][1] = _mm256_fmadd_ps(xv, w1, s[t][1]);
      }
    }
    const __m256 sc0 = _mm256_loadu_ps(scales + b * kRows),
                 sc1 = _mm256_loadu_ps(scales + b * kRows + 8);
    for (int t = 0; t < M; ++t) {
      if constexpr (kAccInRegisters) {
        acc[t][0] = _mm256_fmadd_ps(_mm256_mul_ps(s[t][0], k256), sc0, acc[t][0]);
        acc[t][1] = _mm256_fmadd_ps(_mm256_mul_ps(s[t][1], k256), sc1, acc[t][1]);
      } else {
        float* a = acc_mem[t];
        _mm256_store_ps(a, _mm256_fmadd_ps(_mm256_mul_ps(s[t][0], k256), sc0, _mm256_load_ps(a)));
        _mm256_store_ps(a + 8,
                        _mm256_fmadd_ps(_mm256_mul_ps(s[t][1], k256), sc1, _mm256_load_ps(a + 8)));
      }
    }
  });
  for (int t = 0; t < M; ++t) {
    if constexpr (kAccInRegisters)
      StoreSums(y + t * ldy, acc[t][0], acc[t][1], rows);
    else
      StoreSums(y + t * ldy, _mm256_load_ps(acc_mem[t]), _mm256_load_ps(acc_mem[t] + 8), rows);
  }
}

// One token against two full panels at once, each with SmallTile<1>'s own arithmetic (so the
// results are bit-identical). Why: at m = 1 the kernel streams W from DRAM; two distant panels
// walked together give the hardware prefetchers two streams per core (as MatMulBf16Panels), and
// two independent FMA chains per half instead of one.
void SmallPair1(const float* xp, const uint8_t* p, const float* sp, const uint8_t* q,
                const float* sq, size_t k, size_t col0, float* yp, float* yq, bool accumulate) {
  __m256 ap0 = StartSums(yp, kRows, 0, accumulate), ap1 = StartSums(yp, kRows, 1, accumulate),
         aq0 = StartSums(yq, kRows, 0, accumulate), aq1 = StartSums(yq, kRows, 1, accumulate);
  const __m256 k256 = _mm256_set1_ps(256.0f);
  ForEachFp8ScaleBlock(col0, 0, k, [&](size_t c0, size_t c1, size_t b) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, t0 = s0, t1 = s0;
    for (size_t i = c0; i < c1; ++i) {
      if (i % 4 == 0) {
        Prefetch(p + i * kRows);
        Prefetch(q + i * kRows);
      }
      __m256 w0, w1, v0, v1;
      DecodeColumn(p + i * kRows, w0, w1);
      DecodeColumn(q + i * kRows, v0, v1);
      const __m256 xv = _mm256_broadcast_ss(xp + i * kTile);
      s0 = _mm256_fmadd_ps(xv, w0, s0);
      s1 = _mm256_fmadd_ps(xv, w1, s1);
      t0 = _mm256_fmadd_ps(xv, v0, t0);
      t1 = _mm256_fmadd_ps(xv, v1, t1);
    }
    ap0 = _mm256_fmadd_ps(_mm256_mul_ps(s0, k256), _mm256_loadu_ps(sp + b * kRows), ap0);
    ap1 = _mm256_fmadd_ps(_mm256_mul_ps(s1, k256), _mm256_loadu_ps(sp + b * kRows + 8), ap1);
    aq0 = _mm256_fmadd_ps(_mm256_mul_ps(t0, k256), _mm256_loadu_ps(sq + b * kRows), aq0);
    aq1 = _mm256_fmadd_ps(_mm256_mul_ps(t1, k256), _mm256_loadu_ps(sq + b * kRows + 8), aq1);
  });
  StoreSums(yp, ap0, ap1, kRows);
  StoreSums(yq, aq0, aq1, kRows);
}

using SmallFn = void (*)(const float*, const uint8_t*, const float*, size_t, size_t, float*, size_t,
                         size_t, bool);
constexpr size_t kSmallTokens = 6;     // SmallTile's largest M
static_assert(kSmallTokens == kTile);  // its tokens are one packed x tile
// Up to kSmallTokens tokens (one x tile) a panel runs SmallTile, decoding its codes in registers;
// from 7 the decoded-panel GEMM. While the GEMM decoded each block before its tiles, 7-12 tokens
// had run SmallTile once per x tile, decoding the codes again for each (one core, [1536 x 3072] and
// [3072 x 1536] from DRAM, calls alternating in one process: 1.13-1.46x faster then, 13-18
// 0.86-0.97x); since it decodes in its first token tile, the GEMM against those two passes (Ice
// Lake, [1536 x 3072]): 7 / 9 / 10 / 12 tokens 0.97 / 0.88 / 0.88 / 0.88x the time. Every token's
// y is the same bits either way.
constexpr SmallFn kSmall[kSmallTokens + 1] = {
    nullptr, SmallTile<1>, SmallTile<2>, SmallTile<3>, SmallTile<4>, SmallTile<5>, SmallTile<6>};

// M ≤ 6 tokens (the packed x tile at xt) × one decoded block (pack: columns [k0, k0 + kc) of a
// panel as e4m3 · 2^-8, DecodeColumn's values; its ends are scale block ends) → y, SmallTile's
// arithmetic. The rows' running sums start from y when it holds them at column k0 (from_y: a later
// column block, or a call that adds into y), else from zero, stay in an L1 array between the
// call's scale blocks (a token's rows of y lie in one L1 set at MiniMax-M2's widths:
// matmul_fp8_panels_avx512.cc's PackTile) and end in y.
//
// kDecode: the block's first token tile decodes the columns from the panel's codes (at column 0
// of the view) and stores them into pack as it multiplies them; the later tiles load them from
// there. Against decoding the block before its first tile (decodes and stores with no FMAs for
// the code loads' misses to hide behind), one core (Ice Lake), calls alternating in one process,
// the same bits: [1536 x 3072] at 24 tokens 0.87x the time, [6144 x 3072] at 48 0.90x,
// [3072 x 1536] at 128 0.95x, [1536 x 3072] at 512 0.97x.
template <int M, bool kDecode>
void BlockTile(const uint8_t* codes, const float* xt, float* pack, const float* scales, size_t col0,
               size_t k0, size_t kc, float* y, size_t ldy, size_t rows, bool from_y) {
  const __m256 k256 = _mm256_set1_ps(256.0f);
  alignas(32) float sums[M][kRows] = {};  // (zeroed only to tell the compiler it is written)
  ForEachFp8ScaleBlock(col0, k0, k0 + kc, [&](size_t c0, size_t c1, size_t b) {
    __m256 s[M][2];
#pragma GCC unroll 6
    for (int t = 0; t < M; ++t) s[t][0] = s[t][1] = _mm256_setzero_ps();
    for (size_t i = c0; i < c1; ++i) {
      float* wc = pack + (i - k0) * kRows;
      __m256 w0, w1;
      if constexpr (kDecode) {
        DecodeColumn(codes + i * kRows, w0, w1);
        _mm256_store_ps(wc, w0);
        _mm256_store_ps(wc + 8, w1);
      } else {
        w0 = _mm256_load_ps(wc), w1 = _mm256_load_ps(wc + 8);
      }
#pragma GCC unroll 6
      for (int t = 0; t < M; ++t) {
        const __m256 xv = _mm256_broadcast_ss(xt + i * kTile + t);
        s[t][0] = _mm256_fmadd_ps(xv, w0, s[t][0]);
        s[t][1] = _mm256_fmadd_ps(xv, w1, s[t][1]);
      }
    }
    const __m256 sc0 = _mm256_loadu_ps(scales + b * kRows),
                 sc1 = _mm256_loadu_ps(scales + b * kRows + 8);
    const bool first = c0 == k0, last = c1 == k0 + kc;
#pragma GCC unroll 6
    for (int t = 0; t < M; ++t) {
      __m256 a0, a1;  // the running sums so far
      if (first)
        a0 = StartSums(y + t * ldy, rows, 0, from_y), a1 = StartSums(y + t * ldy, rows, 1, from_y);
      else
        a0 = _mm256_load_ps(sums[t]), a1 = _mm256_load_ps(sums[t] + 8);
      a0 = _mm256_fmadd_ps(_mm256_mul_ps(s[t][0], k256), sc0, a0);
      a1 = _mm256_fmadd_ps(_mm256_mul_ps(s[t][1], k256), sc1, a1);
      if (last) {
        StoreSums(y + t * ldy, a0, a1, rows);
      } else {
        _mm256_store_ps(sums[t], a0);
        _mm256_store_ps(sums[t] + 8, a1);
      }
    }
  });
}

// Above kSmallTokens and up to kPanelGroupOrderMaxTokens tokens the GEMM decodes one panel's
// kStreamCols-column block at a time and runs every token tile over it from L1 before the next
// (ForEachPanelGroupTile), rather than a whole panel (x within 256 KiB) or 256 columns of 256 KiB
// of panels into L2 first. One core (Ice Lake), [6144 x 3072] from DRAM, calls alternating in one
// process: 13 / 16 / 24 / 32 / 64 tokens 0.80 / 0.83 / 0.76 / 0.79 / 0.83x the time, the same bits.
constexpr size_t kStreamCols = 256;

using BlockFn = void (*)(const uint8_t*, const float*, float*, const float*, size_t, size_t, size_t,
                         float*, size_t, size_t, bool);
template <bool kDecode>
constexpr BlockFn kBlockTiles[kTile + 1] = {nullptr,
                                            BlockTile<1, kDecode>,
                                            BlockTile<2, kDecode>,
                                            BlockTile<3, kDecode>,
                                            BlockTile<4, kDecode>,
                                            BlockTile<5, kDecode>,
                                            BlockTile<6, kDecode>};

}  // namespace

// The decoded panels of one block of PanelBlockingFor: one panel's whole k, or a 256-column block
// of several panels.
size_t Fp8PanelPackFloats(size_t k) {
  const PanelBlocking whole = PanelBlockingFor(1, k, kRows * sizeof(float)),
                      blocked = PanelBlockingFor(size_t{1} << 20, k, kRows * sizeof(float));
  return std::max(whole.kc * whole.block_panels, blocked.kc * blocked.block_panels) * kRows;
}

void MatMulFp8Panels(const float* xp, size_t m, const WeightMatrix& w, float* y, size_t ldy,
                     bool accumulate, float* pack) {
  const size_t k = w.cols, panels = (w.rows + kRows - 1) / kRows;
  const auto* codes = static_cast<const uint8_t*>(w.data);
  const auto* scales = static_cast<const float*>(w.scales);
  auto rows_of = [&](size_t p) { return w.rows - p * kRows < kRows ? w.rows - p * kRows : kRows; };
  size_t first = 0;  // panels before it are done
  if (m == 1)        // decode
    first = ForEachFullFp8PanelPair(w, [&](size_t p, size_t q) {
      SmallPair1(xp, codes + p * w.row_stride, scales + p * w.scale_stride,
                 codes + q * w.row_stride, scales + q * w.scale_stride, k, w.col0, y + p * kRows,
                 y + q * kRows, accumulate);
    });
  if (m <= kSmallTokens) {
    for (size_t p = first; p < panels; ++p)
      kSmall[m](xp, codes + p * w.row_stride, scales + p * w.scale_stride, k, w.col0, y + p * kRows,
                ldy, rows_of(p), accumulate);
    return;
  }
  // Each block of panels is decoded once per call, by its first token tile, then every later tile
  // sweeps it. Column blocks end on the weight's scale blocks (a block sum is scaled as its block
  // ends). Up to kPanelGroupOrderMaxTokens tokens a block is one panel's 256 columns
  // (ForEachPanelGroupTile's order).
  const bool stream = m <= kPanelGroupOrderMaxTokens;
  const PanelBlocking b =
      stream ? PanelBlocking{kStreamCols, 1} : PanelBlockingFor(m, k, kRows * sizeof(float));
  const size_t kc_first = b.kc >= k ? k : b.kc - w.col0 % kFp8ScaleBlock;
  const auto tile = [&](size_t t, size_t tokens, size_t k0, size_t kc, size_t p, size_t,
                        size_t first) {
    (t == 0 ? kBlockTiles<true> : kBlockTiles<false>)[tokens](
        codes + p * w.row_stride, xp + t * k, pack + (p - first) * b.kc * kRows,
        scales + p * w.scale_stride, w.col0, k0, kc, y + t * ldy + p * kRows, ldy, rows_of(p),
        accumulate || k0 > 0);
  };
  if (stream)
    ForEachPanelGroupTile<1, kTile>(m, k, panels, b.kc, tile, kc_first);
  else
    ForEachPanelBlockTile<1, kTile>(m, k, panels, b.kc, b.block_panels, tile, kc_first);
}

}  // namespace moeserve::kernels::avx2
