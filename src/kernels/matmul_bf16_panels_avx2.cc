// AVX2 + FMA MatMul over bf16 weights repacked in 16-row panels (bf16_panels.h). One kernel for
// every batch size: a register tile of up to 6 tokens × 16 rows (12 accumulators) sweeps a
// panel's column pairs, each column two 32-byte loads (8 rows each) widened by a byte shuffle
// (the pair's first column) or a mask (its second). No per-call packing of the weights, no
// horizontal sums.
#include <immintrin.h>

#include <array>
#include <cstdint>

#include "kernels/bf16_panels.h"
#include "kernels/internal.h"
#include "kernels/panel_schedule.h"
#include "kernels/side_by_side.h"
#include "kernels/simd_math_avx2.h"

namespace moeserve::kernels::avx2 {
namespace {

constexpr size_t kTile = kPackedXTile;
constexpr size_t kRows = kBf16PanelRows;

// Column 2i (Even) or 2i + 1 (Odd) of a panel's pair i, rows 0..7 (w0) and 8..15 (w1), as f32;
// exact (bf16 is an f32's top half: the even column's half moves up, the odd one's is masked).
// One column at a time, each from its own loads (L1 hits), so that a 6-token tile's 12
// accumulators, two weight vectors and a broadcast fit the 16 registers: with both columns
// widened at once GCC spilled accumulators. The move is a vpshufb, not a shift: on Intel cores
// vector shifts share ports 0 and 1 with the FMAs.
inline void WidenEven(const bf16* panel, size_t i, __m256& w0, __m256& w1) {
  // Per dword: bytes 0, 1 (the even column's bf16) to bytes 2, 3; bytes 0, 1 zero (-128).
  const __m256i up =
      _mm256_setr_epi8(-128, -128, 0, 1, -128, -128, 4, 5, -128, -128, 8, 9, -128, -128, 12, 13,
                       -128, -128, 0, 1, -128, -128, 4, 5, -128, -128, 8, 9, -128, -128, 12, 13);
  const bf16* p = panel + 2 * i * kRows;
  w0 = _mm256_castsi256_ps(
      _mm256_shuffle_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), up));
  w1 = _mm256_castsi256_ps(
      _mm256_shuffle_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kRows)), up));
}
inline void WidenOdd(const bf16* panel, size_t i, __m256& w0, __m256& w1) {
  const __m256 top = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0xffff0000u)));
  const bf16* p = panel + 2 * i * kRows;
  w0 = _mm256_and_ps(_mm256_loadu_ps(reinterpret_cast<const float*>(p)), top);
  w1 = _mm256_and_ps(_mm256_loadu_ps(reinterpret_cast<const float*>(p + kRows)), top);
}

// Requests the weights kPrefetchBytes ahead of column `col` (one 64-byte line = a column pair). At
// small m the kernel streams W from DRAM, and the hardware prefetcher alone leaves bandwidth
// unused (as in the MXFP4 int8 kernel). Past a panel's end this is the next panel: contiguous.
inline void Prefetch(const bf16* col) {
  constexpr size_t kPrefetchBytes = 4096;
  _mm_prefetch(reinterpret_cast<const char*>(col) + kPrefetchBytes, _MM_HINT_T0);
}

// M tokens (xp: a packed x tile at the first column) × the panel's 16 rows over k columns (the
// panel at an even column, on a kBf16PanelSumCols boundary), a chain per block of
// kBf16PanelSumCols columns added into y (bf16_panels.h: the order every batch size shares).
// kStream: the panel comes from DRAM (ForEachPanelGroupTile's order), so every tile requests it
// ahead (else only tiles of at most 4 tokens do).
template <int M, bool kStream = false>
void PanelTile(const float* xp, const bf16* panel, size_t k, float* y, size_t ldy, size_t rows,
               bool accumulate) {
  for (size_t k0 = 0; k0 < k; k0 += kBf16PanelSumCols) {
    const size_t k1 = k - k0 < kBf16PanelSumCols ? k : k0 + kBf16PanelSumCols;
    __m256 acc[M][2];
#pragma GCC unroll 8
    for (int t = 0; t < M; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    auto column = [&](size_t c, __m256 w0, __m256 w1) {
#pragma GCC unroll 8
      for (int t = 0; t < M; ++t) {
        const __m256 xv = _mm256_broadcast_ss(xp + c * kTile + t);
        acc[t][0] = _mm256_fmadd_ps(xv, w0, acc[t][0]);
        acc[t][1] = _mm256_fmadd_ps(xv, w1, acc[t][1]);
      }
    };
    size_t i = k0 / 2;
    __m256 w0, w1;
    for (; 2 * i + 2 <= k1; ++i) {
      if (kStream || M <= 4) Prefetch(panel + 2 * i * kRows);
      WidenEven(panel, i, w0, w1);
      column(2 * i, w0, w1);
      WidenOdd(panel, i, w0, w1);
      column(2 * i + 1, w0, w1);
    }
    if (2 * i < k1) {
      WidenEven(panel, i, w0, w1);
      column(2 * i, w0, w1);
    }
#pragma GCC unroll 8
    for (int t = 0; t < M; ++t) {
      StoreMasked(y + t * ldy, acc[t][0], rows, accumulate || k0 > 0);
      if (rows > 8) StoreMasked(y + t * ldy + 8, acc[t][1], rows - 8, accumulate || k0 > 0);
    }
  }
}

// One token (decode) against one panel, PanelTile<1>'s order: per block of columns one FMA chain
// per 8 rows, even and odd columns in turn. PanelPair1 sweeps two panels with it.
struct GemvAcc {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0;
  // Columns i and i + 1 (i even: one pair) of `panel`, x0 / x1 their broadcast x.
  void Two(const bf16* panel, size_t i, __m256 x0, __m256 x1) {
    __m256 w0, w1, v0, v1;
    WidenEven(panel, i / 2, w0, w1);
    WidenOdd(panel, i / 2, v0, v1);
    a0 = _mm256_fmadd_ps(x0, w0, a0);
    a1 = _mm256_fmadd_ps(x0, w1, a1);
    a0 = _mm256_fmadd_ps(x1, v0, a0);
    a1 = _mm256_fmadd_ps(x1, v1, a1);
  }
  // The last column when k is odd (i even).
  void One(const bf16* panel, size_t i, __m256 x0) {
    __m256 w0, w1;
    WidenEven(panel, i / 2, w0, w1);
    a0 = _mm256_fmadd_ps(x0, w0, a0);
    a1 = _mm256_fmadd_ps(x0, w1, a1);
  }
  void Store(float* y, size_t rows, bool accumulate) const {
    StoreMasked(y, a0, rows, accumulate);
    if (rows > 8) StoreMasked(y + 8, a1, rows - 8, accumulate);
  }
};

// One token against N full panels at once, each with PanelTile<1>'s accumulators and order (so
// the results are bit-identical to N PanelTile<1> calls). Why: at m = 1 the kernel streams W from
// DRAM, and each panel's two FMA chains take a column (32 bytes) per FMA latency (~4 cycles): two
// panels at a time, ~16 bytes per cycle at best, left a Zen 4 core short of its DRAM share
// whenever a miss stalled the chains. N distant panels also give the hardware prefetchers N
// streams per core (Zen 3 with huge pages: two streams a few % to ~10% more GB/s than one).
// Four against two (Zen 4, 2 threads, huge pages, in-process A/B against a plain read of the
// same bytes, [6144 x 3072] / [3072 x 6144] / [1024 x 3072]): 0.80-0.85 / 0.66x the probe
// against 0.70-0.73 / 0.61x in a fast host state (~60 GB/s), 0.92-0.98 against 0.90-0.95x in a
// slow one. Eight would need 16 accumulators: all the registers.
template <int N>
void PanelGroup1(const float* xp, const bf16* const panel[N], size_t k, float* const y[N],
                 bool accumulate) {
  for (size_t k0 = 0; k0 < k; k0 += kBf16PanelSumCols) {
    const size_t k1 = k - k0 < kBf16PanelSumCols ? k : k0 + kBf16PanelSumCols;
    GemvAcc acc[N];
    size_t i = k0;
    // No software prefetch here (PanelTile's small-m tiles keep theirs): Zen 4, 2 threads,
    // huge pages, [6144 x 3072] / [1024 x 3072] from DRAM, in-process A/B against a plain read
    // of the same bytes: 0.72 / 0.58x the probe without, 0.64 / 0.51x with the 4 KiB T0 requests
    // in a fast host state (~63-68 GB/s), 0.93 / 0.90x against 0.90 / 0.78x in a slow one.
    for (; i + 2 <= k1; i += 2) {
      const __m256 x0 = _mm256_broadcast_ss(xp + i * kTile);
      const __m256 x1 = _mm256_broadcast_ss(xp + (i + 1) * kTile);
      for (int n = 0; n < N; ++n) acc[n].Two(panel[n], i, x0, x1);
    }
    if (i < k1) {
      const __m256 x0 = _mm256_broadcast_ss(xp + i * kTile);
      for (int n = 0; n < N; ++n) acc[n].One(panel[n], i, x0);
    }
    for (int n = 0; n < N; ++n) acc[n].Store(y[n], kRows, accumulate || k0 > 0);
  }
}

using TileFn = void (*)(const float*, const bf16*, size_t, float*, size_t, size_t, bool);
constexpr TileFn kTiles[kTile + 1] = {nullptr,      PanelTile<1>, PanelTile<2>, PanelTile<3>,
                                      PanelTile<4>, PanelTile<5>, PanelTile<6>};
constexpr TileFn kStreamTiles[kTile + 1] = {nullptr,
                                            PanelTile<1, true>,
                                            PanelTile<2, true>,
                                            PanelTile<3, true>,
                                            PanelTile<4, true>,
                                            PanelTile<5, true>,
                                            PanelTile<6, true>};

// Up to kPanelGroupOrderMaxTokens tokens a call runs ForEachPanelGroupTile's order (each panel's
// 256-column block from DRAM once, every token tile over it from L1) rather than PanelBlockingFor's
// (whole panels from DRAM in the first token tile, from L2 for the others). One core (Ice Lake),
// [6144 x 3072] from DRAM, calls alternating in one process: 8 / 16 / 24 / 64 tokens 0.88 / 0.87 /
// 0.89 / 0.91x the time; two threads 0.80-0.88x at 8 ([1536 x 3072]), 0.94-0.95x at 16.

}  // namespace

void MatMulBf16Panels(const float* xp, size_t m, const WeightMatrix& w, float* y, size_t ldy,
                      bool accumulate) {
  const size_t k = w.cols, panels = (w.rows + kRows - 1) / kRows;
  const auto* base = static_cast<const bf16*>(w.data);
  if (m == 1 && panels >= 2) {
    // Decode: the full panels in groups of four side by side (four streams), then a pair; an
    // odd or partial last panel alone.
    const auto group = [&]<size_t G>(const std::array<size_t, G>& idx) {
      const bf16* ps[G];
      float* ys[G];
      for (size_t g = 0; g < G; ++g) {
        ps[g] = base + idx[g] * w.row_stride;
        ys[g] = y + idx[g] * kRows;
      }
      PanelGroup1<G>(xp, ps, k, ys, accumulate);
    };
    const size_t full = w.rows / kRows;
    size_t done = ForEachSideBySide<4>(0, full, group);
    done = ForEachSideBySide<2>(done, full - done, group);
    for (size_t p = done; p < panels; ++p) {
      const size_t rows = w.rows - p * kRows < kRows ? w.rows - p * kRows : kRows;
      PanelTile<1>(xp, base + p * w.row_stride, k, y + p * kRows, ldy, rows, accumulate);
    }
    return;
  }
  const bool stream = m <= kPanelGroupOrderMaxTokens;
  const auto tile = [&](size_t t, size_t tokens, size_t k0, size_t kc, size_t p, size_t, size_t) {
    const size_t rows = w.rows - p * kRows < kRows ? w.rows - p * kRows : kRows;
    (stream ? kStreamTiles : kTiles)[tokens](
        xp + t * k + k0 * kTile, base + p * w.row_stride + k0 * kRows, kc, y + t * ldy + p * kRows,
        ldy, rows, accumulate || k0 > 0);
  };
  // Either order adds each kBf16PanelSumCols block into y in column order: the same bits.
  if (stream) return ForEachPanelGroupTile<1, kTile>(m, k, panels, kBf16PanelSumCols, tile);
  const PanelBlocking b = PanelBlockingFor(m, k, kRows * sizeof(bf16));
  ForEachPanelBlockTile<1, kTile>(m, k, panels, b.kc, b.block_panels, tile);
}

}  // namespace moeserve::kernels::avx2
