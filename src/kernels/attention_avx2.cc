// Attention tile with AVX2 + FMA (built with the AVX2 flags).
//
// The fast tile (attention_fast_tile.h, the AVX-512 tile's walk) at 8 keys per chunk, two chunks
// per step: K of each chunk transposed once into kt [head_dim][8 keys] f32 (8 x 8 dword
// transposes of bf16 pairs or of 4 e4m3 codes), V widened into v [16 keys][head_dim] f32, scores
// for up to 8 rows by broadcast FMAs (lane = key; 4 rows x both chunks per pass), the online
// softmax on each row's two 8-lane score vectors, P.V for 2 rows x 32 output columns (8 ymm
// accumulators) at a time (decode over a bf16 cache: V rows widened in registers, up to 6 rows
// x 16 columns at a time, AccumulatePvBf16N). bench_attention with MOESERVE_ISA=avx2 (Ice Lake),
// one core, best of 7, against 8-key steps: prefill 512 72.7-80.8 -> 58.9-61.5 ms (one round 78.2),
// decode 8 x 4096 37.8-44.3 -> 33.2-34.5 (one round 41.5). Why: the generic tile (attention_tile.h
// over Dot / Axpy) spends a horizontal sum per (row, key), a scalar exp per score and a load and
// store of the row's accumulator per key: decode attention read ~2.5 GB/s per core from L2
// (bench_attention --hot). The chunk scratch comes from the worker's tile scratch (any head_dim).
#include <immintrin.h>

#include <cmath>

#include "kernels/attention_prefetch.h"
#include "kernels/e4m3_half_bits.h"
#include "kernels/internal.h"
#include "kernels/row_passes.h"
#include "kernels/scratch.h"
#include "kernels/simd_math_avx2.h"

namespace moeserve::kernels::avx2 {
namespace {

float Dot(const float* a, const float* b, size_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  const size_t n16 = n / 16 * 16, n8 = n / 8 * 8;
  for (size_t i = 0; i < n16; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  if (n8 > n16) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + n16), _mm256_loadu_ps(b + n16), s0);
  float s = HorizontalSum(_mm256_add_ps(s0, s1));
  for (size_t i = n8; i < n; ++i) s += a[i] * b[i];
  return s;
}

void Axpy(float alpha, const float* x, float* y, size_t n) {
  const __m256 va = _mm256_set1_ps(alpha);
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += alpha * x[i];
}

void Scale(float* y, float s, size_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(vs, _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] *= s;
}

void Widen(const bf16* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, LoadBf16(src + i));
  for (; i < n; ++i) {
    const uint32_t u = uint32_t{src[i].bits} << 16;
    __builtin_memcpy(dst + i, &u, 4);
  }
}

void WidenFp8(const uint8_t* src, float scale, float* dst, size_t n) {
  // As the AVX-512 version: value · 2^-8 through fp16 bits (e4m3_half_bits.h), then one rounding
  // of value · scale: · (scale · 256) when that is finite, else · 256 (exact) and · scale.
  const bool fused = std::isfinite(scale * 256.0f);
  const __m256 f1 = _mm256_set1_ps(fused ? scale * 256.0f : 256.0f), s = _mm256_set1_ps(scale);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = E4m3HalfBits8At(src + i);
    __m256 v = _mm256_mul_ps(_mm256_cvtph_ps(h), f1);
    if (!fused) v = _mm256_mul_ps(v, s);
    _mm256_storeu_ps(dst + i, v);
  }
  for (; i < n; ++i) {
    const uint32_t u = (uint32_t{src[i] & 0x7fu} << 20) | (uint32_t{src[i] & 0x80u} << 24);
    float f;
    __builtin_memcpy(&f, &u, 4);
    dst[i] = f * 0x1p120f * scale;
  }
}

#include "kernels/attention_tile.h"

constexpr size_t kKeys = 8;          // keys per chunk: one score vector
constexpr size_t kScoreChunks = 2;   // chunks per step (attention_fast_tile.h)
constexpr size_t kDecodeChunks = 2;  // (2 rows x 4 chunks: the same loads per FMA as 4 x 2)
constexpr size_t kQkRows = 8;        // rows per score pass
constexpr size_t kPvRows = 2;        // rows per P.V pass (2 x 4 ymm accumulators)
// A bf16 tile of at most this many rows reads V rows straight (AccumulatePvBf16N): decode's.
constexpr size_t kDirectPvRows = 8;
constexpr size_t kPairBlock = 16;      // dims of one pair-split block (AccumulatePvBf16N)
constexpr size_t kFp8Block = 8;        // (no direct FP8 P.V: kPvFp8 below)
constexpr size_t kPrefetchChunks = 4;  // the AVX-512 tile's 32 keys ahead

// The 8 x 8 dword transpose of r (row p, lane i) into r (row i, lane p).
inline void Transpose8x8(__m256i r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(_mm256_castsi256_ps(r[i]), _mm256_castsi256_ps(r[i + 1]));
    t[i + 1] = _mm256_unpackhi_ps(_mm256_castsi256_ps(r[i]), _mm256_castsi256_ps(r[i + 1]));
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_castps_si256(_mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
    r[i + 4] = _mm256_castps_si256(_mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
  }
}

// 32 bytes of row p at src: whole when they are in the row (n == 32), else its n bytes and zeros
// (a row's end may be the end of its allocation).
inline __m256i LoadRowBytes(const void* src, size_t n) {
  if (n == 32) return _mm256_loadu_si256(static_cast<const __m256i*>(src));
  alignas(32) uint8_t tmp[32] = {};
  __builtin_memcpy(tmp, src, n);
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(tmp));
}

// kt[j][p] = K[p][j] for j < d, p < 8; keys p >= nk are zero.
void TransposeKeysBf16(const bf16* const rows[kKeys], size_t nk, size_t d, float* kt) {
  const __m256i hi = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  for (size_t j0 = 0; j0 < d; j0 += 16) {
    const size_t n = MinSize(16, d - j0);
    __m256i r[8];
    for (size_t p = 0; p < kKeys; ++p)
      r[p] = p < nk ? LoadRowBytes(rows[p] + j0, 2 * n) : _mm256_setzero_si256();
    Transpose8x8(r);
    // r[i] lane p holds the bf16 pair (2i, 2i + 1) of key p: low half -> f32 by a shift, high
    // half by clearing the low one.
    float* dst = kt + j0 * kKeys;
    for (size_t i = 0; 2 * i < n; ++i) {
      _mm256_store_ps(dst + (2 * i) * kKeys, _mm256_castsi256_ps(_mm256_slli_epi32(r[i], 16)));
      if (2 * i + 1 < n)
        _mm256_store_ps(dst + (2 * i + 1) * kKeys, _mm256_castsi256_ps(_mm256_and_si256(r[i], hi)));
    }
  }
}

// e4m3 byte `kByte` of each dword of x -> f32 value · 2^-120 (magnitude bits at 20..26, sign at
// 31), as WidenFp8: move the byte to the top, shift right 4 arithmetically, mask.
template <int kByte>
inline __m256 Fp8ByteBits(__m256i x) {
  if constexpr (kByte < 3) x = _mm256_slli_epi32(x, 24 - 8 * kByte);
  return _mm256_castsi256_ps(
      _mm256_and_si256(_mm256_srai_epi32(x, 4), _mm256_set1_epi32(static_cast<int>(0x87f00000u))));
}

// kt[j][p] = e4m3(K[p][j]) · scale[p], rounded once as WidenFp8 (× 2^120 is exact), keys p >= nk
// zero. Unlike WidenFp8 this still multiplies f32 subnormals (codes with exponent 0): on Intel
// cores a vector holding one takes a ~100-cycle microcode assist (bench_attention --hot
// --outlier-channels on Emerald Rapids' AVX2 path: FP8 0.40 -> 0.45 ms). The AVX-512 tile's
// assist-free transposes measured ~10% slower on rows without subnormal codes, and here fp16
// bits would also need a dword-to-word narrowing that AVX2 lacks; the AVX2 path is for AMD Zen
// 3, where the assist was not measured (no such machine here).
// (v_pf: always null here, no direct FP8 P.V: kDirectFp8 below.)
void TransposeKeysFp8(const uint8_t* const rows[kKeys], const float* scales, size_t nk, size_t d,
                      float* kt, const uint8_t* const* /*v_pf*/) {
  alignas(32) float sc[kKeys] = {};
  for (size_t p = 0; p < nk; ++p) sc[p] = scales[p];
  const __m256 s = _mm256_load_ps(sc), p120 = _mm256_set1_ps(0x1p120f);
  for (size_t j0 = 0; j0 < d; j0 += 32) {
    const size_t n = MinSize(32, d - j0);
    __m256i r[8];
    for (size_t p = 0; p < kKeys; ++p)
      r[p] = p < nk ? LoadRowBytes(rows[p] + j0, n) : _mm256_setzero_si256();
    Transpose8x8(r);
    // r[i] lane p holds codes 4i .. 4i + 3 of key p.
    float* dst = kt + j0 * kKeys;
    for (size_t i = 0; 4 * i < n; ++i) {
      const __m256 b[4] = {Fp8ByteBits<0>(r[i]), Fp8ByteBits<1>(r[i]), Fp8ByteBits<2>(r[i]),
                           Fp8ByteBits<3>(r[i])};
      for (size_t e = 0; e < 4 && 4 * i + e < n; ++e)
        _mm256_store_ps(dst + (4 * i + e) * kKeys, _mm256_mul_ps(_mm256_mul_ps(b[e], p120), s));
    }
  }
}

// out[c][r][p] = Σ_j q[r][j] · kt[c][j][p] for kRows rows and kChunks chunks (kt + c · d · kKeys,
// out + c · kQkRows · kKeys). FMA latency 4-5 cycles at two a cycle: with few accumulators the
// FMAs are split over independent chains. Two chunks take rows 4 at a time (16 registers: 4 rows
// x 2 chunks of accumulators, both kt vectors, a broadcast), so each broadcast of q feeds two
// FMAs: 8 rows x 1 chunk issued 9 loads per 8 FMAs and were bound by them.
template <int kRows, int kChunks>
inline void Scores(const float* const* q, const float* kt, size_t d, float* out) {
  if constexpr (kChunks > 1 && kRows > 4) {
    Scores<4, kChunks>(q, kt, d, out);
    return Scores<kRows - 4, kChunks>(q + 4, kt, d, out + 4 * kKeys);
  } else {
    constexpr int kAcc = kRows * kChunks;
    constexpr int kChains = kAcc <= 2 ? 4 : (kAcc <= 6 ? 2 : 1);
    __m256 acc[kChunks][kRows][kChains];
    for (int u = 0; u < kChunks; ++u)
      for (int r = 0; r < kRows; ++r)
        for (int c = 0; c < kChains; ++c) acc[u][r][c] = _mm256_setzero_ps();
    const size_t full = d / kChains * kChains;
    for (size_t j = 0; j < full; j += kChains)
      for (int c = 0; c < kChains; ++c) {
        __m256 k[kChunks];
        for (int u = 0; u < kChunks; ++u)
          k[u] = _mm256_load_ps(kt + u * d * kKeys + (j + c) * kKeys);
        for (int r = 0; r < kRows; ++r) {
          const __m256 qv = _mm256_broadcast_ss(q[r] + j + c);
          for (int u = 0; u < kChunks; ++u) acc[u][r][c] = _mm256_fmadd_ps(qv, k[u], acc[u][r][c]);
        }
      }
    for (size_t j = full; j < d; ++j)
      for (int u = 0; u < kChunks; ++u) {
        const __m256 k = _mm256_load_ps(kt + u * d * kKeys + j * kKeys);
        for (int r = 0; r < kRows; ++r)
          acc[u][r][0] = _mm256_fmadd_ps(_mm256_broadcast_ss(q[r] + j), k, acc[u][r][0]);
      }
    for (int u = 0; u < kChunks; ++u)
      for (int r = 0; r < kRows; ++r) {
        __m256 t = acc[u][r][0];
        for (int c = 1; c < kChains; ++c) t = _mm256_add_ps(t, acc[u][r][c]);
        _mm256_store_ps(out + (u * kQkRows + r) * kKeys, t);
      }
  }
}

inline float HorizontalMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// One row's step of the online softmax over `chunks` score vectors (attention_fast_tile.h;
// chunk c's at s + c · kQkRows · kKeys): keys past n_valid masked out of the max, p = e^(s − max)
// zero there (Exp clamps, so the mask is applied after it), p[c · kKeys + lane].
float SoftmaxRow(const float* s, size_t chunks, size_t n_valid, float scale, float& max, float& sum,
                 float* p) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256 sr[kScoreChunks], valid[kScoreChunks];
  __m256 m = _mm256_set1_ps(-INFINITY);
  for (size_t c = 0; c < chunks; ++c) {
    const int n = static_cast<int>(n_valid > c * kKeys ? n_valid - c * kKeys : 0);
    valid[c] = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane));
    sr[c] = _mm256_blendv_ps(
        _mm256_set1_ps(-INFINITY),
        _mm256_mul_ps(_mm256_load_ps(s + c * kQkRows * kKeys), _mm256_set1_ps(scale)), valid[c]);
    m = _mm256_max_ps(m, sr[c]);
  }
  const float old_max = max;
  // The max settles after a few steps: when no score passes it, skip the horizontal max (a chain
  // of dependent shuffles per row and step) as well as the correction's exp.
  const bool moved = _mm256_movemask_ps(_mm256_cmp_ps(m, _mm256_set1_ps(old_max), _CMP_GT_OQ));
  const float new_max = moved ? MaxF(old_max, HorizontalMax(m)) : old_max;
  const float corr = old_max == new_max ? 1.0f
                     : old_max == -INFINITY
                         ? 0.0f
                         : _mm256_cvtss_f32(Exp(_mm256_set1_ps(old_max - new_max)));
  __m256 total = _mm256_setzero_ps();
  for (size_t c = 0; c < chunks; ++c) {
    const __m256 pr = _mm256_and_ps(valid[c], Exp(_mm256_sub_ps(sr[c], _mm256_set1_ps(new_max))));
    _mm256_store_ps(p + c * kKeys, pr);
    total = _mm256_add_ps(total, pr);
  }
  sum = sum * corr + HorizontalSum(total);
  max = new_max;
  return corr;
}

// acc[r][0, d) = acc[r] · corr[r] + Σ_{k < n_keys} p[r][k] · v[k] for kRows rows; p rows are
// ldp floats apart, v rows ldv apart (d rounded up to 8, the padding zero).
template <int kRows>
inline void AccumulatePv(float* const* acc, const float* corr, const float* p, size_t ldp,
                         const float* v, size_t ldv, size_t n_keys, size_t d) {
  size_t j = 0;
  for (; j + 32 <= d; j += 32) {
    __m256 o[kRows][4];
    for (int r = 0; r < kRows; ++r) {
      const __m256 c = _mm256_set1_ps(corr[r]);
      for (int i = 0; i < 4; ++i) o[r][i] = _mm256_mul_ps(_mm256_loadu_ps(acc[r] + j + 8 * i), c);
    }
    for (size_t k = 0; k < n_keys; ++k) {
      const float* vk = v + k * ldv + j;
      const __m256 v0 = _mm256_load_ps(vk), v1 = _mm256_load_ps(vk + 8);
      const __m256 v2 = _mm256_load_ps(vk + 16), v3 = _mm256_load_ps(vk + 24);
      for (int r = 0; r < kRows; ++r) {
        const __m256 pr = _mm256_broadcast_ss(p + r * ldp + k);
        o[r][0] = _mm256_fmadd_ps(pr, v0, o[r][0]);
        o[r][1] = _mm256_fmadd_ps(pr, v1, o[r][1]);
        o[r][2] = _mm256_fmadd_ps(pr, v2, o[r][2]);
        o[r][3] = _mm256_fmadd_ps(pr, v3, o[r][3]);
      }
    }
    for (int r = 0; r < kRows; ++r)
      for (int i = 0; i < 4; ++i) _mm256_storeu_ps(acc[r] + j + 8 * i, o[r][i]);
  }
  for (; j < d; j += 8) {
    __m256 o[kRows];
    for (int r = 0; r < kRows; ++r) {
      alignas(32) float t[8] = {};
      __builtin_memcpy(t, acc[r] + j, MinSize(8, d - j) * sizeof(float));
      o[r] = _mm256_mul_ps(_mm256_load_ps(t), _mm256_set1_ps(corr[r]));
    }
    for (size_t k = 0; k < n_keys; ++k) {
      const __m256 vk = _mm256_load_ps(v + k * ldv + j);  // padding columns: zero, unstored
      for (int r = 0; r < kRows; ++r)
        o[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(p + r * ldp + k), vk, o[r]);
    }
    for (int r = 0; r < kRows; ++r) StoreMasked(acc[r] + j, o[r], d - j, /*accumulate=*/false);
  }
}

void AccumulatePvN(size_t n, float* const* acc, const float* corr, const float* p, size_t ldp,
                   const float* v, size_t ldv, size_t n_keys, size_t d) {
  if (n == 1) return AccumulatePv<1>(acc, corr, p, ldp, v, ldv, n_keys, d);
  AccumulatePv<2>(acc, corr, p, ldp, v, ldv, n_keys, d);
}

// P.V straight from bf16 V rows for tiles of few rows (decode), as the AVX-512 tile's
// AccumulatePvBf16N: a 32-byte load of 16 values becomes two f32 vectors by a shift (even dims)
// and a mask (odd dims); acc rows hold each 16-dim block as its 8 even then its 8 odd dims (the
// pair-split layout, restored by StoreRowScaledPairSplit). kBlocks blocks per pass: 6 rows x 2
// accumulators (or 3 x 4), the two widened vectors and a broadcast fit the 16 registers.
template <int kRows, int kBlocks>
inline void PvBf16Pass(float* const* acc, size_t j, const float* corr, const float* p, size_t ldp,
                       const bf16* const* v, size_t n_keys) {
  const __m256i hi = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  __m256 o[kRows][2 * kBlocks];
  for (int r = 0; r < kRows; ++r) {
    const __m256 c = _mm256_set1_ps(corr[r]);
    for (int i = 0; i < 2 * kBlocks; ++i)
      o[r][i] = _mm256_mul_ps(_mm256_loadu_ps(acc[r] + j + 8 * i), c);
  }
  for (size_t k = 0; k < n_keys; ++k) {
    __m256 w[2 * kBlocks];
    for (int b = 0; b < kBlocks; ++b) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v[k] + j + 16 * b));
      w[2 * b] = _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16));
      w[2 * b + 1] = _mm256_castsi256_ps(_mm256_and_si256(raw, hi));
    }
    for (int r = 0; r < kRows; ++r) {
      const __m256 pr = _mm256_broadcast_ss(p + r * ldp + k);
      for (int i = 0; i < 2 * kBlocks; ++i) o[r][i] = _mm256_fmadd_ps(pr, w[i], o[r][i]);
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int i = 0; i < 2 * kBlocks; ++i) _mm256_storeu_ps(acc[r] + j + 8 * i, o[r][i]);
}

// All dims (d % 16 == 0) of kRows ≤ 6 rows.
template <int kRows>
inline void AccumulatePvBf16(float* const* acc, const float* corr, const float* p, size_t ldp,
                             const bf16* const* v, size_t n_keys, size_t d) {
  constexpr int kBlocks = kRows <= 3 ? 2 : 1;
  size_t j = 0;
  for (; j + 16 * kBlocks <= d; j += 16 * kBlocks)
    PvBf16Pass<kRows, kBlocks>(acc, j, corr, p, ldp, v, n_keys);
  if (j < d) PvBf16Pass<kRows, 1>(acc, j, corr, p, ldp, v, n_keys);
}

void AccumulatePvBf16N(size_t n, float* const* acc, const float* corr, const float* p, size_t ldp,
                       const bf16* const* v, size_t n_keys, size_t d) {
  ForRowPassesOfSix(n, [&](auto rows, size_t r) {
    AccumulatePvBf16<rows>(acc + r, corr + r, p + r * ldp, ldp, v, n_keys, d);
  });
}

// An FP8 cache's V rows stay widened into the chunk scratch here: decoding them in P.V instead
// (as the AVX-512 tile's AccumulatePvFp8N) measured slower on Ice Lake's AVX2 path, the decode's
// shuffles and conversions competing with the FMAs (in-process A/B, one core, decode 1 x 256
// from L2: 0.162 -> 0.193 ms; 8 x 4096 from DRAM within noise).
constexpr bool kDirectFp8 = false;
constexpr void (*kPvFp8)(size_t, float* const*, const float*, const float*, size_t,
                         const uint8_t* const*, const float*, size_t, size_t) = nullptr;

// Decode scores from the transposed chunk scratch. Scores straight from K rows, as the AVX-512
// tile's ScoresFromKeyRowsBf16, were not tried here: with 8-key chunks the 8 transposed rows and a
// decode's 6 accumulators would hold 14 of AVX2's 16 registers, and the 8 x 8 transposes' shuffles
// do not compete with the FMAs on Intel's AVX2 ports as AVX-512's do.
constexpr bool kQkFromRows = false;
constexpr void (*kQkRowsBf16)(size_t, const float* const*, const bf16* const*, const bf16* const*,
                              size_t, float*) = nullptr;

// out = acc · inv for an acc row in the pair-split layout (d % 16 == 0).
void StoreRowScaledPairSplit(const float* acc, float inv, float* out, size_t d) {
  const __m256 vi = _mm256_set1_ps(inv);
  for (size_t j = 0; j < d; j += 16) {
    const __m256 e = _mm256_mul_ps(_mm256_loadu_ps(acc + j), vi);
    const __m256 o = _mm256_mul_ps(_mm256_loadu_ps(acc + j + 8), vi);
    // unpacklo: dims 0-3 | 8-11, unpackhi: dims 4-7 | 12-15 (in-lane interleaves).
    const __m256 lo = _mm256_unpacklo_ps(e, o), hi = _mm256_unpackhi_ps(e, o);
    _mm256_storeu_ps(out + j, _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(out + j + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
  }
}

void StoreRowScaled(const float* acc, float inv, float* out, size_t d) {
  const __m256 vi = _mm256_set1_ps(inv);
  for (size_t j = 0; j < d; j += 8) {
    alignas(32) float t[8] = {};
    const size_t n = MinSize(8, d - j);
    __builtin_memcpy(t, acc + j, n * sizeof(float));
    StoreMasked(out + j, _mm256_mul_ps(_mm256_load_ps(t), vi), n, /*accumulate=*/false);
  }
}

#include "kernels/attention_fast_tile.h"

}  // namespace

void AttentionTile(const AttentionTileArgs& args) {
  if (!args.tile_scratch) return EachKvHead(args, AttentionTileImpl);  // (no chunk scratch)
  if (args.head_dim == 128) return FastTile<128, kScoreChunks>(args);  // MiniMax-M2's, Qwen3's
  FastTile<0, kScoreChunks>(args);
}

}  // namespace moeserve::kernels::avx2
