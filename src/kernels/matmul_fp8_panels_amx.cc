// GEMV (m ≤ 3) over FP8 weights in 16-row panels (fp8_panels.h) on the AMX cores' AVX-512 units:
// codes decoded to exact bf16 by two byte-table lookups, products summed by vdpbf16ps.
//
// Why: the f32-FMA panel GEMV (matmul_fp8_panels_avx512.cc) spends 7 port-0/5 instructions per
// 16 codes (widen, two shifts, a mask, a two-uop vcvtph2ps, the FMA) and read ~20 GB/s from the
// LLC as from DRAM on Emerald Rapids: compute-bound below the read bandwidth. Here 64 codes (a
// panel's 4 columns) take a vpermb, two vpermt2b, a ternlog and two unpacks, then two vdpbf16ps
// per token: 1.1-1.4x the f32 kernel's rate from L1 for 1 to 3 tokens (from 4 on, the vdpbf16ps
// per token cost more than the decode saves and the f32 kernel stays).
//
// Decode: the codes are reordered by one vpermb, vpermt2b looks up the low 7 bits of each in two
// 128-entry byte tables (the low and high byte of the bf16 bits of |e4m3|, exact for subnormal
// codes too: every e4m3 value is a normal bf16), the sign bit is or'ed into the high byte, and
// two vpunpck interleave low and high bytes into the pairs vdpbf16ps wants: lane r = (W[r, c],
// W[r, c + 1]). A panel's 64 bytes at column c hold columns c .. c + 3 (16 rows each), so this
// needs no change of the panel layout the AVX2 and tile kernels stream. VBMI (vpermb, vpermt2b)
// is on every AMX core (MachineIsa requires it for kAmx).
//
// Numerics: x rounded to bf16; per lane, per 128-column scale block, Σ x · e4m3 by vdpbf16ps
// (products exact, two f32 adds per pair, even and odd column pairs in two chains added at the
// block's end), then acc += sum · scale (one FMA). The same reference within a reordered sum's
// roundings; vdpbf16ps flushes bf16 subnormals of x (below 2^-126) to zero. A panel's sums are the
// same alone or paired, so y does not depend on how rows were split over threads.
#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "kernels/fp8_panels.h"
#include "kernels/internal.h"

namespace moeserve::kernels::amx {
namespace {

constexpr size_t kRows = kFp8PanelRows;
constexpr size_t kBlock = kFp8ScaleBlock;
constexpr size_t kTile = avx512bf16::kBf16PanelXTile;  // tokens per x tile (kPanelPairs layout)
constexpr size_t kGroupCols = 4;                       // columns per 64-byte load of a panel

// The bf16 bits of e4m3 magnitude m (code & 0x7f; 0x7f is NaN, never repacked): low bytes, then
// high bytes, 128 each.
struct DecodeTables {
  alignas(64) std::array<uint8_t, 128> lo, hi;
};

DecodeTables MakeTables() {
  DecodeTables t{};
  for (int m = 0; m < 128; ++m) {
    const int e = m >> 3, f = m & 7;
    // e4m3: exponent bias 7, subnormals at e == 0 (f / 8 · 2^-6).
    const float v =
        e == 0 ? static_cast<float>(f) / 8.0f / 64.0f
               : (1.0f + static_cast<float>(f) / 8.0f) * static_cast<float>(1 << e) / 128.0f;
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    const auto b = static_cast<uint16_t>(bits >> 16);  // exact: 3 mantissa bits
    t.lo[m] = static_cast<uint8_t>(b & 0xff);
    t.hi[m] = static_cast<uint8_t>(b >> 8);
  }
  return t;
}

const DecodeTables& Tables() {
  static const DecodeTables t = MakeTables();
  return t;
}

// The constants of the decode, in registers for a whole call.
struct Decoder {
  __m512i lo0, lo1, hi0, hi1;  // the tables: entries 0..63 and 64..127
  __m512i order;               // the byte order vpunpck{l,h}bw needs (below)
  __m512i sign;                // 0x80 in every byte

  Decoder() {
    const DecodeTables& t = Tables();
    lo0 = _mm512_load_si512(t.lo.data());
    lo1 = _mm512_load_si512(t.lo.data() + 64);
    hi0 = _mm512_load_si512(t.hi.data());
    hi1 = _mm512_load_si512(t.hi.data() + 64);
    // vpunpcklbw(lo, hi) makes word n of 128-bit lane L from byte 16L + n (n < 8), vpunpckhbw
    // from byte 16L + 8 + n; dword j of lane L is output row 4L + j. So byte 16L + 2j + e of the
    // reordered codes is W[4L + j, c + e] (panel byte 16e + 4L + j), and byte 16L + 8 + 2j + e is
    // W[4L + j, c + 2 + e] (panel byte 16 (2 + e) + 4L + j).
    alignas(64) uint8_t idx[64];
    for (int lane = 0; lane < 4; ++lane)
      for (int j = 0; j < 4; ++j)
        for (int e = 0; e < 2; ++e) {
          idx[16 * lane + 2 * j + e] = static_cast<uint8_t>(16 * e + 4 * lane + j);
          idx[16 * lane + 8 + 2 * j + e] = static_cast<uint8_t>(16 * (2 + e) + 4 * lane + j);
        }
    order = _mm512_load_si512(idx);
    sign = _mm512_set1_epi8(static_cast<char>(0x80));
  }

  // 64 codes (columns c .. c + 3 of a panel) → two vectors of bf16 pairs: columns (c, c + 1) and
  // (c + 2, c + 3), lane r = row r. One vpermb, two vpermt2b (three uops each on these cores,
  // which is why the interleave is two one-uop unpacks on reordered codes, not two more vpermt2b).
  [[gnu::always_inline]] inline void Decode(__m512i codes, __m512bh& w01, __m512bh& w23) const {
    codes = _mm512_permutexvar_epi8(order, codes);
    const __m512i lo = _mm512_permutex2var_epi8(lo0, codes, lo1);
    // hi | (codes & 0x80): ternary-logic table A | (B & C).
    const __m512i hi =
        _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(hi0, codes, hi1), codes, sign, 0xF8);
    w01 = (__m512bh)_mm512_unpacklo_epi8(lo, hi);
    w23 = (__m512bh)_mm512_unpackhi_epi8(lo, hi);
  }
};

inline __m512bh Broadcast(const uint32_t* pair) {
  return (__m512bh)_mm512_set1_epi32(static_cast<int>(*pair));
}

inline void Store(float* y, __m512 v, size_t rows, bool accumulate) {
  const __mmask16 mask = rows >= 16 ? __mmask16(0xffff) : __mmask16((1u << rows) - 1);
  if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, y));
  _mm512_mask_storeu_ps(y, mask, v);
}

// Columns [0, k) of the view, cut where a 128-column scale block of the full weight ends (with
// col0 % 4 == 0 every cut but the last falls on a 4-column group).
template <typename Fn>
[[gnu::always_inline]] inline void ForEachScaleBlock(size_t col0, size_t k, const Fn& fn) {
  for (size_t c = 0; c < k;) {
    const size_t end_global = ((col0 + c) / kBlock + 1) * kBlock;
    const size_t end = end_global - col0 < k ? end_global - col0 : k;
    fn(c, end, (col0 + c) / kBlock - col0 / kBlock);
    c = end;
  }
}

// Panel p's 64 codes at column c; a group cut by k reads only its columns (the rest zero).
[[gnu::always_inline]] inline __m512i LoadGroup(const uint8_t* panel, size_t c, size_t k) {
  if (c + kGroupCols <= k) return _mm512_loadu_si512(panel + c * kRows);
  const __mmask64 mask = (__mmask64{1} << ((k - c) * kRows)) - 1;
  return _mm512_maskz_loadu_epi8(mask, panel + c * kRows);
}

// Read ahead of the stream into L2 (the panels are one sequential walk each; the hardware
// prefetcher alone left the f32 kernel's stream below the read probe).
constexpr size_t kAhead = 4096;

// vdpbf16ps has a long latency on these cores (~28 cycles measured on Emerald Rapids, one issued
// per 2 cycles): a stream needs ~14 independent sums in flight. Each panel keeps 2 · U chains per
// token (the group's column pairs (c, c + 1) and (c + 2, c + 3), U groups in a row), added at the
// end of each scale block.
//
// M tokens (x: their pair tile, xp[i · kTile + t] = pair i of token t) × P panels (at panel[p],
// scales[p]), U groups per step; rows[p] ≤ 16 of panel p's rows stored into y[p] (ldy between
// tokens).
template <int P, int M, int U>
void PanelTile(const Decoder& d, const uint32_t* xp, const uint8_t* const panel[P],
               const float* const scales[P], size_t k, size_t col0, float* const y[P], size_t ldy,
               const size_t rows[P], bool accumulate) {
  __m512 acc[P][M];
  for (int p = 0; p < P; ++p)
    for (int t = 0; t < M; ++t) acc[p][t] = _mm512_setzero_ps();
  ForEachScaleBlock(col0, k, [&](size_t c0, size_t c1, size_t b) {
    __m512 s[P][M][2 * U];
    for (int p = 0; p < P; ++p)
      for (int t = 0; t < M; ++t)
        for (int u = 0; u < 2 * U; ++u) s[p][t][u] = _mm512_setzero_ps();
    // Steps of U whole groups; the block's last columns (fewer than U groups) after them.
    size_t c = c0;
    for (; c + U * kGroupCols <= c1; c += U * kGroupCols) {
#pragma GCC unroll 2
      for (int u = 0; u < U; ++u) {
        const size_t cu = c + u * kGroupCols, i = cu / 2;
        __m512bh w01[P], w23[P];
#pragma GCC unroll 2
        for (int p = 0; p < P; ++p) {
          const uint8_t* g = panel[p] + cu * kRows;
          _mm_prefetch(reinterpret_cast<const char*>(g) + kAhead, _MM_HINT_T1);
          d.Decode(_mm512_loadu_si512(g), w01[p], w23[p]);
        }
#pragma GCC unroll 8
        for (int t = 0; t < M; ++t) {
          const __m512bh x01 = Broadcast(xp + i * kTile + t);
          const __m512bh x23 = Broadcast(xp + (i + 1) * kTile + t);
#pragma GCC unroll 2
          for (int p = 0; p < P; ++p) {
            s[p][t][2 * u] = _mm512_dpbf16_ps(s[p][t][2 * u], w01[p], x01);
            s[p][t][2 * u + 1] = _mm512_dpbf16_ps(s[p][t][2 * u + 1], w23[p], x23);
          }
        }
      }
    }
    for (; c < c1; c += kGroupCols) {  // at most U - 1 whole groups, then a cut one (at k)
      const size_t i = c / 2;
      __m512bh w01[P], w23[P];
      for (int p = 0; p < P; ++p) d.Decode(LoadGroup(panel[p], c, k), w01[p], w23[p]);
      for (int t = 0; t < M; ++t) {
        const __m512bh x01 = Broadcast(xp + i * kTile + t);
        for (int p = 0; p < P; ++p) s[p][t][0] = _mm512_dpbf16_ps(s[p][t][0], w01[p], x01);
        if (c + 2 < k) {  // the group has a column pair (c + 2, c + 3)
          const __m512bh x23 = Broadcast(xp + (i + 1) * kTile + t);
          for (int p = 0; p < P; ++p) s[p][t][1] = _mm512_dpbf16_ps(s[p][t][1], w23[p], x23);
        }
      }
    }
    for (int p = 0; p < P; ++p) {
      const __m512 sc = _mm512_loadu_ps(scales[p] + b * kRows);
      for (int t = 0; t < M; ++t) {
        __m512 sum = s[p][t][0];
        for (int u = 1; u < 2 * U; ++u) sum = _mm512_add_ps(sum, s[p][t][u]);
        acc[p][t] = _mm512_fmadd_ps(sum, sc, acc[p][t]);
      }
    }
  });
  for (int p = 0; p < P; ++p)
    for (int t = 0; t < M; ++t) Store(y[p] + t * ldy, acc[p][t], rows[p], accumulate);
}

// Groups per step: one token needs two to have 8 chains in flight (2 panels × 2 pairs × U).
template <int M>
constexpr int kUnroll = M == 1 ? 2 : 1;

using TileFn = void (*)(const Decoder&, const uint32_t*, const uint8_t* const*, const float* const*,
                        size_t, size_t, float* const*, size_t, const size_t*, bool);
template <int P>
constexpr TileFn kTiles[kFp8GemvMaxTokens + 1] = {
    nullptr, PanelTile<P, 1, kUnroll<1>>, PanelTile<P, 2, kUnroll<2>>, PanelTile<P, 3, kUnroll<3>>};

}  // namespace

void GemvFp8Panels(const uint32_t* xp, size_t m, const WeightMatrix& w, float* y, size_t ldy,
                   bool accumulate) {
  const size_t k = w.cols, panels = (w.rows + kRows - 1) / kRows;
  const auto* codes = static_cast<const uint8_t*>(w.data);
  const auto* scales = static_cast<const float*>(w.scales);
  const Decoder d;
  auto rows_of = [&](size_t p) { return w.rows - p * kRows < kRows ? w.rows - p * kRows : kRows; };
  // The panels in pairs (j, j + half): two streams per core for the hardware prefetchers, and
  // each decoded group serves twice the chains. A lone panel goes last.
  const size_t half = panels / 2;
  for (size_t j = 0; j < half; ++j) {
    const uint8_t* const pp[2] = {codes + j * w.row_stride, codes + (j + half) * w.row_stride};
    const float* const ps[2] = {scales + j * w.scale_stride, scales + (j + half) * w.scale_stride};
    float* const yp[2] = {y + j * kRows, y + (j + half) * kRows};
    const size_t rows[2] = {rows_of(j), rows_of(j + half)};
    kTiles<2>[m](d, xp, pp, ps, k, w.col0, yp, ldy, rows, accumulate);
  }
  if (panels % 2 == 1) {
    const size_t p = panels - 1;
    const uint8_t* const pp[1] = {codes + p * w.row_stride};
    const float* const ps[1] = {scales + p * w.scale_stride};
    float* const yp[1] = {y + p * kRows};
    const size_t rows[1] = {rows_of(p)};
    kTiles<1>[m](d, xp, pp, ps, k, w.col0, yp, ldy, rows, accumulate);
  }
}

}  // namespace moeserve::kernels::amx
