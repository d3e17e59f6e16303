// Attention tile with AVX-512 F (built with the AVX-512 flags, no BF16 instruction: the avx512,
// avx512bf16 and amx tables run it).
//
// The fast tile (FastTile below) visits keys 64 at a time in prefill, 32 in decode: a step of
// four or two 16-key "chunks" of consecutive positions that may span cache blocks of any size,
// for all rows of the work item at once (row = query of the tile x q head of the kv head's group):
//   1. K of each chunk is transposed once into kt [head_dim][16 keys] f32 (bf16 pairs or 4 e4m3
//      codes per dword: one 16x16 dword transpose covers 32 bf16 or 64 fp8 dims), and V widened
//      into v [step keys][head_dim] f32. Both are shared by every row of the item.
//   2. Scores: for up to 8 rows (4 rows x 4 chunks) at a time, score vectors (lane = key, one per
//      chunk) += q[r][j] (broadcast) x kt[j], over j < head_dim: pure FMAs, no horizontal sums.
//      Decode over a bf16 cache skips kt: each block of K rows is transposed in registers and
//      multiplied there (ScoresFromKeyRowsBf16).
//   3. Online softmax per row on its step's score vectors: masked (causal end, partial step), one
//      horizontal max, vector exp (simd_math_avx512.h, ~2e-7 relative), one horizontal sum.
//   4. P.V for up to 4 rows at a time, 64 output columns (4 zmm per row) in registers across the
//      step's keys; the row's accumulator is rescaled as it is loaded. Decode (at most 8 rows
//      per kv head, bf16 cache) reads V rows straight instead of widening them in step 1
//      (AccumulatePvBf16N).
// K/V rows a step ahead are prefetched into L2 (scattered blocks defeat the hardware
// prefetcher). The chunk scratch comes from the worker's tile scratch (any head_dim).
// Numerics as the generic tile and AttentionReference: q, scores, softmax and sums in f32, K and
// V dequantized exactly (bf16 -> f32, e4m3 x scale with one f32 rounding); only summation order
// (and the exp) differ.
#include <immintrin.h>

#include <cmath>

#include "kernels/attention_avx512_shared.h"
#include "kernels/internal.h"
#include "kernels/row_passes.h"
#include "kernels/scratch.h"
#include "kernels/simd_math_avx512.h"
#include "kernels/transpose_avx512.h"

namespace moeserve::kernels::avx512 {
namespace {

float Dot(const float* a, const float* b, size_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = TailMask16(n - i);
    s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

void Axpy(float alpha, const float* x, float* y, size_t n) {
  const __m512 va = _mm512_set1_ps(alpha);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask16(n - i);
    _mm512_mask_storeu_ps(
        y + i, m,
        _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

void Scale(float* y, float s, size_t n) {
  const __m512 vs = _mm512_set1_ps(s);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask16(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(vs, _mm512_maskz_loadu_ps(m, y + i)));
  }
}

void Widen(const bf16* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask16(n - i);
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, src + i));
    _mm512_mask_storeu_ps(dst + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
  }
}

// e4m3 · scale, rounded once: (value · 2^-8) · (scale · 256) when scale · 256 is finite (both
// factors exact: the same real product), else (value · 2^-8 · 256) · scale.
void WidenFp8(const uint8_t* src, float scale, float* dst, size_t n) {
  const bool fused = std::isfinite(scale * 256.0f);
  const __m512 f1 = _mm512_set1_ps(fused ? scale * 256.0f : 256.0f);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask16(n - i);
    __m512 v = _mm512_mul_ps(E4m3ToF32Over256(_mm_maskz_loadu_epi8(m, src + i)), f1);
    if (!fused) v = _mm512_mul_ps(v, _mm512_set1_ps(scale));
    _mm512_mask_storeu_ps(dst + i, m, v);
  }
}

#include "kernels/attention_tile.h"

constexpr size_t kKeys = 16;  // keys per chunk: one score vector
// Chunks per step (attention_fast_tile.h): prefill 4 (a score pass of 4 rows x 4 chunks issues
// 8 loads per 16 FMAs, 8 rows x 2 chunks 10: 85% against 73% of the FMA peak alone, one core;
// prefill 512 in-process 8-12% faster), decode 2 (decode 8 x 4096 from DRAM was 10-20% slower
// in steps of 4 chunks, from L2 the same; with the bf16 decode's scores from K rows and its V
// requests spread over them, 4 chunks against 2 in process: K / V in the LLC 0.95x the time, from
// DRAM, 8 x 4096 and 1 x 32768, 1.05-1.08x).
constexpr size_t kScoreChunks = 4;
constexpr size_t kDecodeChunks = 2;
constexpr size_t kQkRows = 8;  // rows per score pass (8 FMA chains, kt loaded once)
constexpr size_t kPvRows = 4;  // rows per P.V pass (4 x 4 zmm accumulators)
// A bf16 tile of at most this many rows reads V rows straight (AccumulatePvBf16N): decode's.
constexpr size_t kDirectPvRows = 8;
constexpr size_t kPairBlock = 32;  // dims of one pair-split block (AccumulatePvBf16N)
constexpr size_t kFp8Block = 16;   // dims AccumulatePvFp8N decodes at a time
// Software prefetch distance in chunks (decode, 8 x 4096 tokens bf16, Zen 4: 1 chunk -> ~20%
// less time than none; 2 chunks into L2 -> ~20% less again; 4 no better).
constexpr size_t kPrefetchChunks = 2;

// kt[j][p] = K[p][j] for j < d, p < 16; keys p >= nk are zero.
void TransposeKeysBf16(const bf16* const rows[kKeys], size_t nk, size_t d, float* kt) {
  const __m512i hi = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  for (size_t j0 = 0; j0 < d; j0 += 32) {
    const size_t n = MinSize(32, d - j0);
    const __mmask32 m = TailMask32(n);
    __m512i r[16];
    for (size_t p = 0; p < kKeys; ++p)
      r[p] = p < nk ? _mm512_maskz_loadu_epi16(m, rows[p] + j0) : _mm512_setzero_si512();
    Transpose16x16(r);
    // r[i] lane p holds the bf16 pair (2i, 2i + 1) of key p: low half -> f32 by a shift, high
    // half by clearing the low one.
    float* dst = kt + j0 * kKeys;
    if (n == 32) {
      for (int i = 0; i < 16; ++i) {
        _mm512_store_ps(dst + (2 * i) * kKeys, _mm512_castsi512_ps(_mm512_slli_epi32(r[i], 16)));
        _mm512_store_ps(dst + (2 * i + 1) * kKeys, _mm512_castsi512_ps(_mm512_and_si512(r[i], hi)));
      }
    } else {
      for (size_t j = 0; j < n; ++j) {
        const __m512i x = r[j / 2];
        _mm512_store_ps(dst + j * kKeys, _mm512_castsi512_ps(j % 2 ? _mm512_and_si512(x, hi)
                                                                   : _mm512_slli_epi32(x, 16)));
      }
    }
  }
}

// e4m3 byte `kByte` of each dword of x -> value · 2^-8 as f32 (as E4m3ToF32Over256): the byte
// moved to bits 8..15, one arithmetic place right within the low 16-bit half, then only the sign
// (15) and exponent and mantissa (13..7) kept (the bits below come from the next byte), the
// dwords narrowed to their low halves for vcvtph2ps.
template <int kByte>
inline __m512 Fp8ByteOver256(__m512i x) {
  if constexpr (kByte == 0) x = _mm512_slli_epi32(x, 8);
  if constexpr (kByte > 1) x = _mm512_srli_epi32(x, 8 * kByte - 8);
  const __m512i h =
      _mm512_and_si512(_mm512_srai_epi16(x, 1), _mm512_set1_epi32(static_cast<int>(0xBF80)));
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h));
}

// kt[j][p] = e4m3(K[p][j]) · scale[p], rounded once to f32 as WidenFp8 (keys p >= nk: zero).
// v_pf (or null): the chunk's V rows (direct P.V), requested into L1 a line per row and 64-code
// block beside the block's K loads: requested in a burst after the transpose they had the
// prefetches wait for line fill buffers (in process, one and two threads, from the LLC and DRAM:
// 0.97x the time spread here).
void TransposeKeysFp8(const uint8_t* const rows[kKeys], const float* scales, size_t nk, size_t d,
                      float* kt, const uint8_t* const* v_pf) {
  const __m512 s = _mm512_maskz_loadu_ps(TailMask16(nk), scales);
  const __m512 s256 = _mm512_mul_ps(s, _mm512_set1_ps(256.0f));
  const bool fused =
      _mm512_cmp_ps_mask(s256, _mm512_set1_ps(INFINITY), _CMP_LT_OQ) == __mmask16(0xffff);
  const __m512 f1 = fused ? s256 : _mm512_set1_ps(256.0f);
  auto store = [&](float* dst, __m512 v) {
    __m512 x = _mm512_mul_ps(v, f1);
    if (!fused) x = _mm512_mul_ps(x, s);
    _mm512_store_ps(dst, x);
  };
  for (size_t j0 = 0; j0 < d; j0 += 64) {
    const size_t n = MinSize(64, d - j0);
    const __mmask64 m = n == 64 ? ~__mmask64(0) : (__mmask64(1) << n) - 1;
    __m512i r[16];
    for (size_t p = 0; p < kKeys; ++p)
      r[p] = p < nk ? _mm512_maskz_loadu_epi8(m, rows[p] + j0) : _mm512_setzero_si512();
    if (v_pf)
      for (size_t p = 0; p < nk; ++p)
        _mm_prefetch(reinterpret_cast<const char*>(v_pf[p] + j0), _MM_HINT_T0);
    Transpose16x16(r);
    // r[i] lane p holds codes 4i .. 4i + 3 of key p.
    float* dst = kt + j0 * kKeys;
    if (n == 64) {
      for (int i = 0; i < 16; ++i) {
        store(dst + (4 * i + 0) * kKeys, Fp8ByteOver256<0>(r[i]));
        store(dst + (4 * i + 1) * kKeys, Fp8ByteOver256<1>(r[i]));
        store(dst + (4 * i + 2) * kKeys, Fp8ByteOver256<2>(r[i]));
        store(dst + (4 * i + 3) * kKeys, Fp8ByteOver256<3>(r[i]));
      }
    } else {
      for (size_t j = 0; j < n; ++j) {
        const __m512i x = r[j / 4];
        const __m512 v = j % 4 == 0   ? Fp8ByteOver256<0>(x)
                         : j % 4 == 1 ? Fp8ByteOver256<1>(x)
                         : j % 4 == 2 ? Fp8ByteOver256<2>(x)
                                      : Fp8ByteOver256<3>(x);
        store(dst + j * kKeys, v);
      }
    }
  }
}

// out[c][r] (lane p) = Σ_j q[r][j] · kt[c][j][p] for kRows rows and kChunks chunks (kt + c · d ·
// kKeys, out + c · kQkRows · kKeys). With few rows the FMAs are split over independent chains
// (FMA latency 4 cycles, one zmm FMA per cycle). Each broadcast of q feeds kChunks FMAs: with 8
// rows and one chunk the pass issued 9 loads per 8 FMAs and was bound by them; 3-4 chunks take
// the rows 4 at a time (16 accumulators: 8 loads per 16 FMAs).
template <int kRows, int kChunks>
inline void Scores(const float* const* q, const float* kt, size_t d, float* out) {
  if constexpr (kChunks > 2 && kRows > 4) {  // 4 rows at a time: 16 accumulators
    Scores<4, kChunks>(q, kt, d, out);
    return Scores<kRows - 4, kChunks>(q + 4, kt, d, out + 4 * kKeys);
  } else {
    constexpr int kChains = kRows >= 4 ? 1 : (kRows == 1 ? 4 : 2);
    __m512 acc[kChunks][kRows][kChains];
    for (int u = 0; u < kChunks; ++u)
      for (int r = 0; r < kRows; ++r)
        for (int c = 0; c < kChains; ++c) acc[u][r][c] = _mm512_setzero_ps();
    const size_t full = d / kChains * kChains;
    for (size_t j = 0; j < full; j += kChains)
      for (int c = 0; c < kChains; ++c) {
        __m512 k[kChunks];
        for (int u = 0; u < kChunks; ++u)
          k[u] = _mm512_load_ps(kt + u * d * kKeys + (j + c) * kKeys);
        for (int r = 0; r < kRows; ++r) {
          const __m512 qv = _mm512_set1_ps(q[r][j + c]);
          for (int u = 0; u < kChunks; ++u) acc[u][r][c] = _mm512_fmadd_ps(qv, k[u], acc[u][r][c]);
        }
      }
    for (size_t j = full; j < d; ++j)
      for (int u = 0; u < kChunks; ++u) {
        const __m512 k = _mm512_load_ps(kt + u * d * kKeys + j * kKeys);
        for (int r = 0; r < kRows; ++r)
          acc[u][r][0] = _mm512_fmadd_ps(_mm512_set1_ps(q[r][j]), k, acc[u][r][0]);
      }
    for (int u = 0; u < kChunks; ++u)
      for (int r = 0; r < kRows; ++r) {
        __m512 t = acc[u][r][0];
        for (int c = 1; c < kChains; ++c) t = _mm512_add_ps(t, acc[u][r][c]);
        _mm512_store_ps(out + (u * kQkRows + r) * kKeys, t);
      }
  }
}

// Decode's scores straight from a chunk's 16 bf16 K rows, without the kt scratch: each 32-dim
// block of the rows is transposed in registers (t[i] lane p: dims 2i and 2i + 1 of key p), widened
// by a shift and a mask, and multiplied into the rows' score vectors there. The scratch path
// (TransposeKeysBf16, then Scores) stores the 16 widened vectors of a block and loads them back in
// the score pass, and its transposes wait on the K rows' loads with nothing else to do; for a
// decode's 6 rows per kv head that traffic is as large as the FMAs it feeds. One core (Ice Lake),
// in-process A/B, decode from DRAM: 8 x 4096 0.92-0.94x the time (1 and 2 threads), 1 x 16384
// 0.93x, 1 x 2048 0.93-0.95x; from L2 (1 x 128-512) 0.96-1.03x. One FMA chain per row: its two
// FMAs per vector are dependent, but a block's shuffles and widenings leave the FMA ports that
// time, and with the 16 transposed rows it keeps every accumulator in a register (with even and
// odd dims in separate chains GCC spilled them; 0.95-0.99x the time of that, same harness).
// v_pf (or null): the chunk's 16 V rows, requested into L1 here a line per row and block, beside
// the block's K loads, for P.V after the softmax. Requested in a burst before the scores (256
// lines a 64-key step) they had the prefetches wait for line fill buffers, the tile with them:
// in process, spread here, 0.92-0.95x the time (from L2, the LLC and DRAM, one and two threads).
// out[r] (lane p) = q[r] · K[p] for kRows ≤ 6 rows; d % 32 == 0; all 16 K (and V) row pointers
// valid (past the chunk's keys they repeat a valid row, whose scores the softmax masks).
template <int kRows>
inline void ScoresFromKeyRowsBf16(const float* const* q, const bf16* const* rows,
                                  const bf16* const* v_pf, size_t d, float* out) {
  const __m512i hi = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  __m512 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_ps();
  for (size_t j0 = 0; j0 < d; j0 += 32) {
    __m512i t[16];
    for (int p = 0; p < 16; ++p) t[p] = _mm512_loadu_si512(rows[p] + j0);
    if (v_pf)  // V rows' line j0 / 32 (32 bf16 = 64 bytes)
      for (int p = 0; p < 16; ++p)
        _mm_prefetch(reinterpret_cast<const char*>(v_pf[p] + j0), _MM_HINT_T0);
    Transpose16x16(t);
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      const __m512 e = _mm512_castsi512_ps(_mm512_slli_epi32(t[i], 16));
      const __m512 o = _mm512_castsi512_ps(_mm512_and_si512(t[i], hi));
      for (int r = 0; r < kRows; ++r) {
        acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(q[r][j0 + 2 * i]), e, acc[r]);
        acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(q[r][j0 + 2 * i + 1]), o, acc[r]);
      }
    }
  }
  for (int r = 0; r < kRows; ++r) _mm512_store_ps(out + r * kKeys, acc[r]);
}

// n ≤ kQkRows rows (out rows kKeys floats apart); 7 or 8 rows in two passes.
void ScoresFromKeyRowsBf16N(size_t n, const float* const* q, const bf16* const* rows,
                            const bf16* const* v_pf, size_t d, float* out) {
  ForRowPassesOfSix(n, [&](auto nr, size_t r) {
    ScoresFromKeyRowsBf16<nr>(q + r, rows, v_pf, d, out + r * kKeys);
  });
}

// FastTile's decode scores over a bf16 cache (its direct P.V tiles, d % 32 == 0).
constexpr bool kQkFromRows = true;
constexpr auto kQkRowsBf16 = ScoresFromKeyRowsBf16N;

// acc[r][0, d) = acc[r] · corr[r] + Σ_{k < n_keys} p[r][k] · v[k] for kRows rows; p rows are
// ldp floats apart, v rows ldv apart.
template <int kRows>
inline void AccumulatePv(float* const* acc, const float* corr, const float* p, size_t ldp,
                         const float* v, size_t ldv, size_t n_keys, size_t d) {
  size_t j = 0;
  for (; j + 64 <= d; j += 64) {
    __m512 o[kRows][4];
    for (int r = 0; r < kRows; ++r) {
      const __m512 c = _mm512_set1_ps(corr[r]);
      for (int i = 0; i < 4; ++i) o[r][i] = _mm512_mul_ps(_mm512_loadu_ps(acc[r] + j + 16 * i), c);
    }
    for (size_t k = 0; k < n_keys; ++k) {
      const float* vk = v + k * ldv + j;
      const __m512 v0 = _mm512_load_ps(vk), v1 = _mm512_load_ps(vk + 16);
      const __m512 v2 = _mm512_load_ps(vk + 32), v3 = _mm512_load_ps(vk + 48);
      for (int r = 0; r < kRows; ++r) {
        const __m512 pr = _mm512_set1_ps(p[r * ldp + k]);
        o[r][0] = _mm512_fmadd_ps(pr, v0, o[r][0]);
        o[r][1] = _mm512_fmadd_ps(pr, v1, o[r][1]);
        o[r][2] = _mm512_fmadd_ps(pr, v2, o[r][2]);
        o[r][3] = _mm512_fmadd_ps(pr, v3, o[r][3]);
      }
    }
    for (int r = 0; r < kRows; ++r)
      for (int i = 0; i < 4; ++i) _mm512_storeu_ps(acc[r] + j + 16 * i, o[r][i]);
  }
  for (; j < d; j += 16) {
    const __mmask16 m = TailMask16(d - j);
    __m512 o[kRows];
    for (int r = 0; r < kRows; ++r)
      o[r] = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, acc[r] + j), _mm512_set1_ps(corr[r]));
    for (size_t k = 0; k < n_keys; ++k) {
      const __m512 vk = _mm512_load_ps(v + k * ldv + j);  // padding columns: finite, unstored
      for (int r = 0; r < kRows; ++r)
        o[r] = _mm512_fmadd_ps(_mm512_set1_ps(p[r * ldp + k]), vk, o[r]);
    }
    for (int r = 0; r < kRows; ++r) _mm512_mask_storeu_ps(acc[r] + j, m, o[r]);
  }
}

void AccumulatePvN(size_t n, float* const* acc, const float* corr, const float* p, size_t ldp,
                   const float* v, size_t ldv, size_t n_keys, size_t d) {
  switch (n) {
    case 1:
      return AccumulatePv<1>(acc, corr, p, ldp, v, ldv, n_keys, d);
    case 2:
      return AccumulatePv<2>(acc, corr, p, ldp, v, ldv, n_keys, d);
    case 3:
      return AccumulatePv<3>(acc, corr, p, ldp, v, ldv, n_keys, d);
    default:
      return AccumulatePv<4>(acc, corr, p, ldp, v, ldv, n_keys, d);
  }
}

// P.V straight from bf16 V rows, for tiles of few rows (decode: 6 q heads per kv head). With
// few rows sharing a V row, widening it into the chunk scratch (a load, a widening, a store and
// a reload per 16 values) cost more than the FMAs it fed: ~26% of a decode step's samples (perf,
// one core, V in L2). Here a 64-byte load of 32 values becomes two f32 vectors in registers by a
// shift (even dims) and a mask (odd dims), so acc rows hold each 32-dim block as its 16 even
// dims then its 16 odd dims (the pair-split layout; StoreRowScaledPairSplit restores the order).
// acc[r] = acc[r] · corr[r] + Σ_{k < n_keys} p[r][k] · v[k] over dims [j, j + 32 · kBlocks).
template <int kRows, int kBlocks>
inline void PvBf16Pass(float* const* acc, size_t j, const float* corr, const float* p, size_t ldp,
                       const bf16* const* v, size_t n_keys) {
  const __m512i hi = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  __m512 o[kRows][2 * kBlocks];
  for (int r = 0; r < kRows; ++r) {
    const __m512 c = _mm512_set1_ps(corr[r]);
    for (int i = 0; i < 2 * kBlocks; ++i)
      o[r][i] = _mm512_mul_ps(_mm512_loadu_ps(acc[r] + j + 16 * i), c);
  }
  for (size_t k = 0; k < n_keys; ++k) {
    __m512 w[2 * kBlocks];
    for (int b = 0; b < kBlocks; ++b) {
      const __m512i raw = _mm512_loadu_si512(v[k] + j + 32 * b);
      w[2 * b] = _mm512_castsi512_ps(_mm512_slli_epi32(raw, 16));
      w[2 * b + 1] = _mm512_castsi512_ps(_mm512_and_si512(raw, hi));
    }
    for (int r = 0; r < kRows; ++r) {
      const __m512 pr = _mm512_set1_ps(p[r * ldp + k]);
      for (int i = 0; i < 2 * kBlocks; ++i) o[r][i] = _mm512_fmadd_ps(pr, w[i], o[r][i]);
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int i = 0; i < 2 * kBlocks; ++i) _mm512_storeu_ps(acc[r] + j + 16 * i, o[r][i]);
}

// All dims (d % 32 == 0) of kRows ≤ 6 rows: 64 dims per pass up to 4 rows (16 accumulators),
// else 32 (at 64, 6 rows' 24 accumulators had spilled); each V row is loaded and widened once
// either way.
template <int kRows>
inline void AccumulatePvBf16(float* const* acc, const float* corr, const float* p, size_t ldp,
                             const bf16* const* v, size_t n_keys, size_t d) {
  constexpr int kBlocks = kRows <= 4 ? 2 : 1;
  size_t j = 0;
  for (; j + 32 * kBlocks <= d; j += 32 * kBlocks)
    PvBf16Pass<kRows, kBlocks>(acc, j, corr, p, ldp, v, n_keys);
  if (j < d) PvBf16Pass<kRows, 1>(acc, j, corr, p, ldp, v, n_keys);
}

void AccumulatePvBf16N(size_t n, float* const* acc, const float* corr, const float* p, size_t ldp,
                       const bf16* const* v, size_t n_keys, size_t d) {
  ForRowPassesOfSix(n, [&](auto rows, size_t r) {
    AccumulatePvBf16<rows>(acc + r, corr + r, p + r * ldp, ldp, v, n_keys, d);
  });
}

// P.V straight from FP8 V rows (decode), as AccumulatePvBf16N: 16 codes become 16 f32 values
// in registers, exactly as WidenFp8 writes them into the chunk scratch (value · 2^-8 through
// fp16 bits, then one rounding of · scale · 256, or · 256 and · scale where scale · 256 is not
// finite), each key's row decoded once for all rows (up to 6 rows per pass), so the sums are the
// scratch path's bit for bit. acc rows in the plain layout; over dims [j, j + 16 · kVecs).
template <int kRows, int kVecs>
inline void PvFp8Pass(float* const* acc, size_t j, const float* corr, const float* p, size_t ldp,
                      const uint8_t* const* v, const float* scales, size_t n_keys) {
  __m512 o[kRows][kVecs];
  for (int r = 0; r < kRows; ++r) {
    const __m512 c = _mm512_set1_ps(corr[r]);
    for (int i = 0; i < kVecs; ++i)
      o[r][i] = _mm512_mul_ps(_mm512_loadu_ps(acc[r] + j + 16 * i), c);
  }
  for (size_t k = 0; k < n_keys; ++k) {
    const float scale = scales[k], scale256 = scale * 256.0f;
    const bool fused = std::isfinite(scale256);
    const __m512 f1 = _mm512_set1_ps(fused ? scale256 : 256.0f);
    __m512 w[kVecs];
    for (int i = 0; i < kVecs; ++i) {
      w[i] = _mm512_mul_ps(_mm512_cvtph_ps(E4m3HalfBits16At(v[k] + j + 16 * i)), f1);
      if (!fused) w[i] = _mm512_mul_ps(w[i], _mm512_set1_ps(scale));
    }
    for (int r = 0; r < kRows; ++r) {
      const __m512 pr = _mm512_set1_ps(p[r * ldp + k]);
      for (int i = 0; i < kVecs; ++i) o[r][i] = _mm512_fmadd_ps(pr, w[i], o[r][i]);
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int i = 0; i < kVecs; ++i) _mm512_storeu_ps(acc[r] + j + 16 * i, o[r][i]);
}

// All dims (d % 16 == 0) of kRows ≤ 6 rows: 64 dims per pass up to 4 rows, else 32.
template <int kRows>
inline void AccumulatePvFp8(float* const* acc, const float* corr, const float* p, size_t ldp,
                            const uint8_t* const* v, const float* scales, size_t n_keys, size_t d) {
  constexpr int kVecs = kRows <= 4 ? 4 : 2;
  size_t j = 0;
  for (; j + 16 * kVecs <= d; j += 16 * kVecs)
    PvFp8Pass<kRows, kVecs>(acc, j, corr, p, ldp, v, scales, n_keys);
  for (; j < d; j += 16) PvFp8Pass<kRows, 1>(acc, j, corr, p, ldp, v, scales, n_keys);
}

void AccumulatePvFp8N(size_t n, float* const* acc, const float* corr, const float* p, size_t ldp,
                      const uint8_t* const* v, const float* scales, size_t n_keys, size_t d) {
  ForRowPassesOfSix(n, [&](auto rows, size_t r) {
    AccumulatePvFp8<rows>(acc + r, corr + r, p + r * ldp, ldp, v, scales, n_keys, d);
  });
}

// FastTile's direct P.V over an FP8 cache.
constexpr bool kDirectFp8 = true;
constexpr auto kPvFp8 = AccumulatePvFp8N;

// out = acc · inv for an acc row in the pair-split layout (d % 32 == 0): each block's even and
// odd halves interleaved back by two two-source permutes.
void StoreRowScaledPairSplit(const float* acc, float inv, float* out, size_t d) {
  const __m512 vi = _mm512_set1_ps(inv);
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi =
      _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  for (size_t j = 0; j < d; j += 32) {
    const __m512 e = _mm512_mul_ps(_mm512_loadu_ps(acc + j), vi);
    const __m512 o = _mm512_mul_ps(_mm512_loadu_ps(acc + j + 16), vi);
    _mm512_storeu_ps(out + j, _mm512_permutex2var_ps(e, lo, o));
    _mm512_storeu_ps(out + j + 16, _mm512_permutex2var_ps(e, hi, o));
  }
}

// One row's step of the online softmax over `chunks` score vectors (chunk c's at s + c · kQkRows ·
// kKeys, keys c · kKeys ..): scores scaled and masked (keys past n_valid: −inf), the running max
// moved once for the step, p = e^(s − max) (zero where masked; p[c · kKeys + lane]), the sum
// rescaled and increased. One horizontal max and one sum per step, not per chunk.
float SoftmaxRow(const float* s, size_t chunks, size_t n_valid, float scale, float& max, float& sum,
                 float* p) {
  __m512 sr[kScoreChunks];
  __mmask16 valid[kScoreChunks];
  __m512 m = _mm512_set1_ps(-INFINITY);
  for (size_t c = 0; c < chunks; ++c) {
    valid[c] = TailMask16(n_valid > c * kKeys ? n_valid - c * kKeys : 0);
    sr[c] = _mm512_mask_mul_ps(_mm512_set1_ps(-INFINITY), valid[c],
                               _mm512_load_ps(s + c * kQkRows * kKeys), _mm512_set1_ps(scale));
    m = _mm512_max_ps(m, sr[c]);
  }
  const float old_max = max;
  // The max settles after a few steps: when no score passes it, skip the horizontal max (a chain
  // of dependent shuffles per row and step) as well as the correction's exp.
  const bool moved = _mm512_cmp_ps_mask(m, _mm512_set1_ps(old_max), _CMP_GT_OQ) != 0;
  const float new_max = moved ? MaxF(old_max, _mm512_reduce_max_ps(m)) : old_max;
  const float corr = old_max == new_max ? 1.0f
                     : old_max == -INFINITY
                         ? 0.0f
                         : _mm512_cvtss_f32(Exp(_mm512_set1_ps(old_max - new_max)));
  __m512 total = _mm512_setzero_ps();
  for (size_t c = 0; c < chunks; ++c) {
    const __m512 pr =
        _mm512_maskz_mov_ps(valid[c], Exp(_mm512_sub_ps(sr[c], _mm512_set1_ps(new_max))));
    _mm512_store_ps(p + c * kKeys, pr);
    total = _mm512_add_ps(total, pr);
  }
  sum = sum * corr + _mm512_reduce_add_ps(total);
  max = new_max;
  return corr;
}

void StoreRowScaled(const float* acc, float inv, float* out, size_t d) {
  const __m512 vi = _mm512_set1_ps(inv);
  for (size_t j = 0; j < d; j += 16) {
    const __mmask16 m = TailMask16(d - j);
    _mm512_mask_storeu_ps(out + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, acc + j), vi));
  }
}

// kD: the head dim as a compile-time constant (0: a.head_dim at run time). With it the per-key
// loops (V widening, prefetch, transpose, scores, P.V) are straight-line code instead of loops of
// a few instructions each with their own counters and tail masks.
#include "kernels/attention_fast_tile.h"

}  // namespace

void AttentionTile(const AttentionTileArgs& args) {
  if (!args.tile_scratch) return EachKvHead(args, AttentionTileImpl);  // (no chunk scratch)
  const bool decode = (args.q1 - args.q0) * args.group <= kDirectPvRows;
  if (args.head_dim == 128)  // MiniMax-M2's and Qwen3-MoE's
    return decode ? FastTile<128, kDecodeChunks>(args) : FastTile<128, kScoreChunks>(args);
  decode ? FastTile<0, kDecodeChunks>(args) : FastTile<0, kScoreChunks>(args);
}

}  // namespace moeserve::kernels::avx512
