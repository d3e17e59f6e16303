// AVX-512 BF16 MatMul kernels (this TU only is built with -mavx512bf16 and friends).
//
// GEMV (few tokens): lanes run along k, each 32-bf16 weight load feeding one vdpbf16ps per token,
// the 16 lane partial sums reduced at the end of the row. One token streams whole rows; 2..7
// tokens walk 8-row blocks in 1024-column chunks so their x stays in L1 (BlockedGemv).
// GEMM: lanes run along the output features. A panel of 32 weight rows is packed once into
// [k/2][32][2] bf16 pairs (L2 resident) and swept by a 12-token × 32-feature register tile:
// per k pair, 2 vector loads of the panel, 12 broadcasts of x pairs, 24 vdpbf16ps.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/internal.h"
#include "kernels/simd_math_avx512.h"
#include "kernels/transpose_avx512.h"

namespace moeserve::kernels::avx512bf16 {
namespace {

constexpr size_t kPanel = 32;  // output features per packed panel (2 vectors)
constexpr int kTileTokens = 12;

inline __m512bh AsBh(__m512i v) {
  return (__m512bh)v;
}

inline void StoreRow(float* y, __m512 v, __mmask16 mask, bool accumulate) {
  if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, y));
  _mm512_mask_storeu_ps(y, mask, v);
}

// One weight row · one token over k. Rows are read one at a time, front to back: a single
// sequential stream is what the hardware prefetcher follows best (measured on a Zen 4 core:
// 21 GB/s for one row at a time vs 13-17 GB/s interleaving 2-8 rows, and software prefetch only
// hurt). Two accumulators hide the vdpbf16ps latency. x is zero padded to a multiple of 32.
inline void RowDot(const bf16* x, const bf16* w, size_t k, float* y, bool accumulate) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 64 <= k; i += 64) {
    acc0 = _mm512_dpbf16_ps(acc0, AsBh(_mm512_loadu_si512(x + i)), AsBh(_mm512_loadu_si512(w + i)));
    acc1 = _mm512_dpbf16_ps(acc1, AsBh(_mm512_loadu_si512(x + i + 32)),
                            AsBh(_mm512_loadu_si512(w + i + 32)));
  }
  for (; i < k; i += 32)  // a full x load is safe (zero padding) and adds zeros
    acc0 = _mm512_dpbf16_ps(acc0, AsBh(_mm512_loadu_si512(x + i)),
                            AsBh(_mm512_maskz_loadu_epi16(TailMask32(k - i), w + i)));
  const float s = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
  *y = accumulate ? *y + s : s;
}

// pack[p][j][2] = W[j][2p .. 2p+1] for j < 32 (rows beyond `rows` and k beyond `k` are zero):
// 16 rows × 16 pairs at a time, transposed in registers.
void PackPanel(const bf16* w, size_t row_stride, size_t k, size_t rows, bf16* pack) {
  const size_t pairs = (k + 1) / 2;
  int32_t* out = reinterpret_cast<int32_t*>(pack);
  for (size_t half = 0; half < 2; ++half) {
    for (size_t p0 = 0; p0 < pairs; p0 += 16) {
      const __mmask32 mask = TailMask32(k - 2 * p0);
      __m512i r[16];
      for (size_t i = 0; i < 16; ++i) {
        const size_t j = half * 16 + i;
        r[i] = j < rows ? _mm512_maskz_loadu_epi16(mask, w + j * row_stride + 2 * p0)
                        : _mm512_setzero_si512();
      }
      Transpose16x16(r);
      const size_t n = pairs - p0 < 16 ? pairs - p0 : 16;
      for (size_t c = 0; c < n; ++c) _mm512_store_si512(out + (p0 + c) * kPanel + half * 16, r[c]);
    }
  }
}

// Software prefetch of the weight rows of the panel after the current one, spread over the
// current panel's tiles: packing reads its panel from DRAM (a model's weights are far larger
// than the LLC), and without this the read is a stall between two panels' compute instead of
// overlapping it.
struct PanelPrefetch {
  const char* row_ptr = nullptr;  // row being prefetched
  size_t row_stride_bytes = 0;
  size_t lines_per_row = 0;
  size_t rows_left = 0;  // rows of the next panel not yet fully prefetched; 0: nothing to do
  size_t line = 0;       // next line within row_ptr's row
  size_t per_pair = 0;   // lines per k pair in the tile being computed

  // Prefetch of rows [first, first + group) of w ([rows][row_stride] bf16, k columns) spread over
  // `steps` calls of Issue(); nothing when that group starts at or past `rows`.
  static PanelPrefetch NextGroup(const bf16* w, size_t row_stride, size_t k, size_t rows,
                                 size_t first, size_t group, size_t steps) {
    PanelPrefetch pf;
    if (first >= rows) return pf;
    pf.rows_left = rows - first < group ? rows - first : group;
    pf.row_ptr = reinterpret_cast<const char*>(w + first * row_stride);
    pf.row_stride_bytes = row_stride * sizeof(bf16);
    pf.lines_per_row = (k * sizeof(bf16) + 63) / 64;
    pf.per_pair = (pf.rows_left * pf.lines_per_row + steps - 1) / steps;
    return pf;
  }

  // Counters only, no division: this runs once per k pair of the tile loop (a division per line
  // here made small-m GEMMs 2x slower).
  inline void Issue() {
    for (size_t i = 0; i < per_pair && rows_left; ++i) {
      _mm_prefetch(row_ptr + line * 64, _MM_HINT_T1);
      if (++line == lines_per_row) {
        line = 0;
        row_ptr += row_stride_bytes;
        --rows_left;
      }
    }
  }
};

template <int M>
void GemmTile(const bf16* xb, size_t ldxb, const bf16* pack, size_t pairs, float* y, size_t ldy,
              size_t rows, bool accumulate, PanelPrefetch* pf) {
  __m512 acc[M][2];
  for (int t = 0; t < M; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
  const int32_t* x32[M];
  for (int t = 0; t < M; ++t) x32[t] = reinterpret_cast<const int32_t*>(xb + t * ldxb);
  const __m512i* wp = reinterpret_cast<const __m512i*>(pack);
  for (size_t p = 0; p < pairs; ++p) {
    const __m512i w0 = _mm512_load_si512(wp + 2 * p), w1 = _mm512_load_si512(wp + 2 * p + 1);
    for (int t = 0; t < M; ++t) {
      const __m512i xv = _mm512_set1_epi32(x32[t][p]);
      acc[t][0] = _mm512_dpbf16_ps(acc[t][0], AsBh(xv), AsBh(w0));
      acc[t][1] = _mm512_dpbf16_ps(acc[t][1], AsBh(xv), AsBh(w1));
    }
    if (pf->rows_left) pf->Issue();
  }
  const __mmask16 m0 = TailMask16(rows), m1 = TailMask16(rows > 16 ? rows - 16 : 0);
  for (int t = 0; t < M; ++t) {
    StoreRow(y + t * ldy, acc[t][0], m0, accumulate);
    if (m1) StoreRow(y + t * ldy + 16, acc[t][1], m1, accumulate);
  }
}

using TileFn = void (*)(const bf16*, size_t, const bf16*, size_t, float*, size_t, size_t, bool,
                        PanelPrefetch*);
constexpr TileFn kTiles[kTileTokens + 1] = {
    nullptr,     GemmTile<1>, GemmTile<2>, GemmTile<3>,  GemmTile<4>,  GemmTile<5>, GemmTile<6>,
    GemmTile<7>, GemmTile<8>, GemmTile<9>, GemmTile<10>, GemmTile<11>, GemmTile<12>};

// GEMV for 2..7 tokens. Streaming whole rows (RowDot) needs all m rows of x hot in L1 beside
// the weight row; at k = 3072 and m >= 3 that is more than L1 holds and every x load missed
// (Zen 4, one core, [1536, 3072] from DRAM: m = 3 / 4 took 732 / 1077 us, vs 330 for m = 1).
// Here rows go in blocks of 8 and columns in chunks of 1024: a chunk of x (m × 2 KiB) stays in
// L1 while the block's 8 rows pass over it, per-(row, token) partial vectors live in a small
// buffer across chunks, and the next block's rows are prefetched into L2 meanwhile (the chunked
// walk is no longer one sequential stream the hardware prefetcher follows).
constexpr size_t kBlockRows = 8, kColChunk = 1024;
constexpr int kBlockTokens = 7;  // tokens per pass over a row block (2 × 7 accumulators + 2 W)

// y[t, j] (+)= x[t] · W[j] for j < nr rows of a block and M tokens.
template <int M>
void BlockDot(const bf16* xb, size_t ldxb, const bf16* wb, size_t row_stride, size_t k, size_t nr,
              float* y, size_t ldy, bool accumulate, PanelPrefetch& pf) {
  alignas(64) __m512 part[kBlockRows][M];
  for (size_t j = 0; j < nr; ++j)
    for (int t = 0; t < M; ++t) part[j][t] = _mm512_setzero_ps();
  for (size_t c0 = 0; c0 < k; c0 += kColChunk) {
    const size_t c1 = k - c0 < kColChunk ? k : c0 + kColChunk;
    for (size_t j = 0; j < nr; ++j) {
      const bf16* wr = wb + j * row_stride;
      __m512 a0[M], a1[M];
      for (int t = 0; t < M; ++t) a0[t] = part[j][t], a1[t] = _mm512_setzero_ps();
      size_t i = c0;
      for (; i + 64 <= c1; i += 64) {
        const __m512i w0 = _mm512_loadu_si512(wr + i), w1 = _mm512_loadu_si512(wr + i + 32);
        for (int t = 0; t < M; ++t) {
          a0[t] = _mm512_dpbf16_ps(a0[t], AsBh(_mm512_loadu_si512(xb + t * ldxb + i)), AsBh(w0));
          a1[t] =
              _mm512_dpbf16_ps(a1[t], AsBh(_mm512_loadu_si512(xb + t * ldxb + i + 32)), AsBh(w1));
        }
        if (pf.rows_left) pf.Issue();
      }
      for (; i < c1; i += 32) {  // only at the end of k (chunks are multiples of 64)
        const __m512i wv = _mm512_maskz_loadu_epi16(TailMask32(c1 - i), wr + i);
        for (int t = 0; t < M; ++t)  // x is zero padded to whole vectors
          a0[t] = _mm512_dpbf16_ps(a0[t], AsBh(_mm512_loadu_si512(xb + t * ldxb + i)), AsBh(wv));
      }
      for (int t = 0; t < M; ++t) part[j][t] = _mm512_add_ps(a0[t], a1[t]);
    }
  }
  for (size_t j = 0; j < nr; ++j)
    for (int t = 0; t < M; ++t) {
      const float sum = _mm512_reduce_add_ps(part[j][t]);
      float& out = y[t * ldy + j];
      out = accumulate ? out + sum : sum;
    }
}

using BlockDotFn = void (*)(const bf16*, size_t, const bf16*, size_t, size_t, size_t, float*,
                            size_t, bool, PanelPrefetch&);
constexpr BlockDotFn kBlockDot[kBlockTokens + 1] = {nullptr,     BlockDot<1>, BlockDot<2>,
                                                    BlockDot<3>, BlockDot<4>, BlockDot<5>,
                                                    BlockDot<6>, BlockDot<7>};

// Tokens in passes of up to 7 over each row block; the block's rows come from DRAM once (into
// L2 by the prefetch during the previous block) and from L2 for later passes.
void BlockedGemv(const bf16* xb, size_t ldxb, size_t m, const bf16* w, size_t row_stride, size_t k,
                 size_t rows, float* y, size_t ldy, bool accumulate) {
  const size_t passes = (m + kBlockTokens - 1) / kBlockTokens;
  for (size_t r0 = 0; r0 < rows; r0 += kBlockRows) {
    const size_t nr = rows - r0 < kBlockRows ? rows - r0 : kBlockRows;
    const bf16* wb = w + r0 * row_stride;
    const size_t steps = passes * nr * (k / 64 > 0 ? k / 64 : 1);  // inner iterations
    PanelPrefetch pf =
        PanelPrefetch::NextGroup(w, row_stride, k, rows, r0 + kBlockRows, kBlockRows, steps);
    for (size_t t0 = 0; t0 < m; t0 += kBlockTokens) {
      const size_t mt = m - t0 < kBlockTokens ? m - t0 : kBlockTokens;
      kBlockDot[mt](xb + t0 * ldxb, ldxb, wb, row_stride, k, nr, y + t0 * ldy + r0, ldy, accumulate,
                    pf);
    }
  }
}

}  // namespace

void ToBf16Rows(const float* x, size_t ldx, size_t m, size_t k, bf16* out, size_t ldo) {
  const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  for (size_t t = 0; t < m; ++t) {
    const float* xt = x + t * ldx;
    bf16* ot = out + t * ldo;
    for (size_t i = 0; i < ldo; i += 16) {
      const __mmask16 mask = i < k ? TailMask16(k - i) : 0;
      const __m512i u = _mm512_castps_si512(_mm512_maskz_loadu_ps(mask, xt + i));
      // Round to nearest even exactly as F32ToBf16: u + 0x7fff + lsb, NaNs kept quiet.
      __m512i r = _mm512_add_epi32(
          u, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
      r = _mm512_srli_epi32(r, 16);
      const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, abs_mask), inf);
      r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
      const __mmask16 store = TailMask16(ldo - i);
      _mm256_mask_storeu_epi16(ot + i, store, _mm512_cvtepi32_epi16(r));
    }
  }
}

void GemvBf16(const bf16* xb, size_t ldxb, size_t m, const bf16* w, size_t row_stride, size_t k,
              size_t rows, float* y, size_t ldy, bool accumulate) {
  if (m >= 2) return BlockedGemv(xb, ldxb, m, w, row_stride, k, rows, y, ldy, accumulate);
  // One token: whole rows, front to back, one sequential stream.
  for (size_t r = 0; r < rows; ++r) RowDot(xb, w + r * row_stride, k, y + r, accumulate);
}

void PackPanelBf16(const bf16* w, size_t row_stride, size_t k, size_t rows, bf16* pack) {
  PackPanel(w, row_stride, k, rows, pack);
}

size_t PackElemsGemmBf16(size_t k) {
  return (k + 1) / 2 * 2 * kPanel;
}

void GemmBf16(const bf16* xb, size_t ldxb, size_t m, const bf16* w, size_t row_stride, size_t k,
              size_t rows, float* y, size_t ldy, bool accumulate, bf16* pack) {
  const size_t pairs = (k + 1) / 2;
  const size_t tiles = (m + kTileTokens - 1) / kTileTokens;
  for (size_t n = 0; n < rows; n += kPanel) {
    const size_t panel_rows = rows - n < kPanel ? rows - n : kPanel;
    PackPanel(w + n * row_stride, row_stride, k, panel_rows, pack);
    PanelPrefetch pf =
        PanelPrefetch::NextGroup(w, row_stride, k, rows, n + kPanel, kPanel, tiles * pairs);
    size_t t = 0;
    for (; t + kTileTokens <= m; t += kTileTokens)
      GemmTile<kTileTokens>(xb + t * ldxb, ldxb, pack, pairs, y + t * ldy + n, ldy, panel_rows,
                            accumulate, &pf);
    if (t < m)
      kTiles[m - t](xb + t * ldxb, ldxb, pack, pairs, y + t * ldy + n, ldy, panel_rows, accumulate,
                    &pf);
  }
}

}  // namespace moeserve::kernels::avx512bf16
