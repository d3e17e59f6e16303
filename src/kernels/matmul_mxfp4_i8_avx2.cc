// AVX2 int8 kernels of mxfp4_i8.h: Q8 activation quantization and the MXFP4 × Q8 matmul (built
// with the AVX2 flags). Bit-identical to the scalar references: the integer dot products are
// exact, and the per-block f32 steps are the reference's own operations in the same order.
//
// The matmul maps each e2m1 code to u = 2·e2m1 + 12 (0..24, unsigned) with one vpshufb, so
// vpmaddubsw(u, x) runs with the activations signed; S = Σ u·q − 12·Σ q is the signed dot.
// A vpmaddubsw lane is at most 2 · 24 · 127 = 6096, so four of them add exactly in int16 before
// vpmaddwd widens to int32 (the bound allows five; eight in two halves of four is symmetric).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/internal.h"

namespace moeserve::kernels::avx2 {
namespace {

constexpr size_t kBlock = kMxfp4I8Block;
constexpr size_t kGroupRows = kMxfp4I8GroupRows;
constexpr size_t kBlockCodeBytes = 128;
// Largest k whose decoded row group (8 · k bytes of u) the matmul keeps in its stack buffer and
// reuses across token tiles; a larger k decodes every block once per tile of 4 tokens instead.
constexpr size_t kMaxBufferedBlocks = 128;
// Per-token, per-block constants (0.5·d and 12·sum) precomputed for a run of tokens.
constexpr size_t kTokenConstants = 4096;
constexpr int kTile = 4;  // tokens per pass over a block's decoded weights (register-resident)

inline __m256i Broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// e8m0 bytes of 8 rows → 2^(e − 127) in f32, as E8M0ToFloat: e << 23 is the exact power for
// e = 1 .. 254; e = 0 gives +0, which max() lifts to 2^-127; e = 255 gives +inf, and f − f
// (0 for finite f, NaN for inf) turns that into NaN while adding +0 to every other value.
inline __m256 RowScales(const uint8_t* s) {
  const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s)));
  const __m256 f = _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  return _mm256_add_ps(_mm256_max_ps(f, _mm256_set1_ps(0x1p-127f)), _mm256_sub_ps(f, f));
}

// Half h of one block (16 columns) of a row group: 4 registers of u = 2·e2m1 + 12; register i
// holds columns 16h + 4i .. 16h + 4i + 3 of the 8 rows (one int32 lane per row), as the layout's
// chunk 2h + i / 2 holds them in its low (even i) or high (odd i) nibbles.
inline void DecodeHalf(const uint8_t* block_codes, int h, __m256i u[4]) {
  const __m256i lut = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,
                                       12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  for (int c = 0; c < 2; ++c) {
    const __m256i v =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block_codes + 64 * h + 32 * c));
    u[2 * c] = _mm256_shuffle_epi8(lut, _mm256_and_si256(v, nibble));
    u[2 * c + 1] = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble));
  }
}

// Token constants of one block: h = 0.5f·d (the reference's factor) and c = 12·sum (the offset
// of u), for tokens t of a run at h[t·stride], c[t·stride].
struct TokenBlock {
  const int8_t* q;  // token 0's 32 activations of the block
  size_t ldq;
  const float* h;
  const int32_t* c;
  size_t stride;
};

// A row group's weights, either decoded on the fly from the repacked codes or read back from a
// buffer of decoded blocks (u: 8 vectors per block, dw: one vector of 8 row scales per block).
struct GroupCodes {
  const uint8_t* codes;
  const uint8_t* scales;
  // Requests the codes and scales 64 blocks (8 KiB of codes) ahead. At small m the kernel
  // streams W from DRAM, and measured on Zen 3 this reads ~20% faster than leaving it all to the
  // hardware prefetcher (16 blocks ahead gained most of that, 64 a few % more). always_inline:
  // GCC counts prefetches as free of side effects, so at -O2 it judged a call of this function
  // (not inlined early) dead and removed every prefetch of the kernel (0 in the -O2 object; -O3,
  // the Release flags, inlined it first).
  [[gnu::always_inline]] void Prefetch(size_t b) const {
    constexpr size_t kAhead = 64;
    const char* c = reinterpret_cast<const char*>(codes + (b + kAhead) * kBlockCodeBytes);
    _mm_prefetch(c, _MM_HINT_T0);
    _mm_prefetch(c + 64, _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(scales + (b + kAhead) * kGroupRows), _MM_HINT_T0);
  }
  void Half(size_t b, int h, __m256i u[4]) const { DecodeHalf(codes + b * kBlockCodeBytes, h, u); }
  __m256 Scales(size_t b) const { return RowScales(scales + b * kGroupRows); }
};
struct GroupBuffer {
  const __m256i* u;
  const __m256* dw;
  void Prefetch(size_t) const {}
  void Half(size_t b, int h, __m256i u_out[4]) const {
    for (int i = 0; i < 4; ++i) u_out[i] = _mm256_load_si256(u + 8 * b + 4 * h + i);
  }
  __m256 Scales(size_t b) const { return _mm256_load_ps(reinterpret_cast<const float*>(dw + b)); }
};

// acc[t] = fmaf(float(S), dw · h, acc[t]) for T tokens and block b, S the exact dot of u − 12
// and q. Each half's four vpmaddubsw add in int16 (≤ 4 · 6096) before vpmaddwd widens them;
// going by halves keeps 4 weight registers live instead of 8, so 4 tokens fit in registers.
template <int T, typename Weights>
inline void BlockDot(const Weights& w, size_t b, const TokenBlock& x, __m256 acc[T]) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i s[T];
  for (int h = 0; h < 2; ++h) {
    __m256i u[4];
    w.Half(b, h, u);
    for (int t = 0; t < T; ++t) {
      const int8_t* q = x.q + t * x.ldq + 16 * h;
      __m256i p = _mm256_maddubs_epi16(u[0], Broadcast4(q));
      for (int i = 1; i < 4; ++i)
        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(u[i], Broadcast4(q + 4 * i)));
      p = _mm256_madd_epi16(p, ones);
      s[t] = h == 0 ? p : _mm256_add_epi32(s[t], p);
    }
  }
  const __m256 dw = w.Scales(b);
  for (int t = 0; t < T; ++t) {
    const __m256i st = _mm256_sub_epi32(s[t], _mm256_set1_epi32(x.c[t * x.stride]));
    const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(x.h[t * x.stride]));
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(st), scale, acc[t]);
  }
}

// y rows of T tokens (token t at y + t·ldy), `rows` ≤ 8 of them valid: = or += acc[t].
template <int T>
inline void StoreTile(const __m256 acc[T], float* y, size_t ldy, size_t rows, bool accumulate) {
  for (int t = 0; t < T; ++t) {
    float* out = y + t * ldy;
    if (rows == kGroupRows) {
      const __m256 v = accumulate ? _mm256_add_ps(_mm256_loadu_ps(out), acc[t]) : acc[t];
      _mm256_storeu_ps(out, v);
      continue;
    }
    alignas(32) float v[8];
    _mm256_store_ps(v, acc[t]);
    for (size_t r = 0; r < rows; ++r) out[r] = accumulate ? out[r] + v[r] : v[r];
  }
}

// T tokens × one row group over all blocks, in block order (the reference's order).
template <int T, typename Weights>
void GroupTile(const Weights& w, size_t blocks, TokenBlock x, float* y, size_t ldy, size_t rows,
               bool accumulate) {
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (size_t b = 0; b < blocks; ++b) {
    w.Prefetch(b);
    BlockDot<T>(w, b, x, acc);
    x.q += kBlock;
    ++x.h;
    ++x.c;
  }
  StoreTile<T>(acc, y, ldy, rows, accumulate);
}

// Tokens [0, n) of a run against one row group, in tiles of kTile.
template <typename Weights>
void GroupTokens(const Weights& w, size_t blocks, TokenBlock x, size_t n, float* y, size_t ldy,
                 size_t rows, bool accumulate) {
  size_t t = 0;
  for (; t + kTile <= n; t += kTile) {
    GroupTile<kTile>(w, blocks, x, y + t * ldy, ldy, rows, accumulate);
    x.q += kTile * x.ldq;
    x.h += kTile * x.stride;
    x.c += kTile * x.stride;
  }
  y += t * ldy;
  switch (n - t) {
    case 1:
      return GroupTile<1>(w, blocks, x, y, ldy, rows, accumulate);
    case 2:
      return GroupTile<2>(w, blocks, x, y, ldy, rows, accumulate);
    case 3:
      return GroupTile<3>(w, blocks, x, y, ldy, rows, accumulate);
    default:
      return;
  }
}

// One token against two full row groups at once, each with GroupTile<1>'s own arithmetic (so the
// results are bit-identical). Why: at m = 1 the kernel streams W from DRAM, and walking two
// distant groups together gives the hardware prefetchers two streams per core instead of one
// (as MatMulBf16Panels' PanelPair1; measured on Zen 3 with huge pages: more GB/s).
void GroupPair1(const GroupCodes& a, const GroupCodes& b, size_t blocks, TokenBlock x, float* ya,
                float* yb, bool accumulate) {
  __m256 acc_a[1] = {_mm256_setzero_ps()}, acc_b[1] = {_mm256_setzero_ps()};
  // No software prefetch here (the tiles keep GroupCodes::Prefetch): each half's run of groups
  // is a sequential stream the hardware prefetchers follow. MoeExperts at one token, Zen 4
  // (AVX2 path), 2 threads, huge pages, in-process A/B against the read probe of the same bytes:
  // 0.73x without against 0.59-0.61x with the 8 KiB T0 requests in a fast host state (~68 GB/s),
  // 0.97x against 0.94x in a slow one (~34 GB/s).
  for (size_t i = 0; i < blocks; ++i) {
    BlockDot<1>(a, i, x, acc_a);
    BlockDot<1>(b, i, x, acc_b);
    x.q += kBlock;
    ++x.h;
    ++x.c;
  }
  StoreTile<1>(acc_a, ya, 0, kGroupRows, accumulate);
  StoreTile<1>(acc_b, yb, 0, kGroupRows, accumulate);
}

void DecodeGroup(const GroupCodes& w, size_t blocks, __m256i* u, __m256* dw) {
  for (size_t b = 0; b < blocks; ++b) {
    w.Prefetch(b);
    for (int h = 0; h < 2; ++h) {
      __m256i v[4];
      w.Half(b, h, v);
      for (int i = 0; i < 4; ++i) _mm256_store_si256(u + 8 * b + 4 * h + i, v[i]);
    }
    dw[b] = w.Scales(b);
  }
}

}  // namespace

void QuantizeRowsQ8(const float* x, size_t ldx, size_t m, size_t k, int8_t* q, size_t ldq, float* d,
                    int32_t* sum, size_t ldd) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
  // packs_epi32 / packs_epi16 interleave the 128-bit lanes; this puts the 8 dwords back in order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (size_t t = 0; t < m; ++t) {
    for (size_t b = 0; b < k / kBlock; ++b) {
      const float* v = x + t * ldx + b * kBlock;
      __m256 f[4];
      __m256 amax = _mm256_setzero_ps();
      for (int i = 0; i < 4; ++i) {
        f[i] = _mm256_loadu_ps(v + 8 * i);
        amax = _mm256_max_ps(amax, _mm256_and_ps(f[i], abs_mask));
      }
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
      const float scale = _mm_cvtss_f32(m4) / 127.0f;
      d[t * ldd + b] = scale;
      int8_t* out = q + t * ldq + b * kBlock;
      if (scale == 0.0f) {  // as the reference: also a subnormal amax that underflows here
        std::memset(out, 0, kBlock);
        sum[t * ldd + b] = 0;
        continue;
      }
      const __m256 vs = _mm256_set1_ps(scale);
      __m256i n[4];
      for (int i = 0; i < 4; ++i) {
        const __m256 r =
            _mm256_round_ps(_mm256_div_ps(f[i], vs), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        n[i] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
      }
      const __m256i s =
          _mm256_add_epi32(_mm256_add_epi32(n[0], n[1]), _mm256_add_epi32(n[2], n[3]));
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
      s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
      sum[t * ldd + b] = _mm_cvtsi128_si32(s4);
      const __m256i packed =
          _mm256_packs_epi16(_mm256_packs_epi32(n[0], n[1]), _mm256_packs_epi32(n[2], n[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                          _mm256_permutevar8x32_epi32(packed, order));
    }
  }
}

void MatMulMxfp4I8(const Q8Rows& x, const WeightMatrix& w, float* y, size_t ldy, bool accumulate) {
  const size_t blocks = x.k / kBlock, groups = (w.rows + kGroupRows - 1) / kGroupRows;
  if (x.m == 0 || w.rows == 0) return;
  // k beyond kTokenConstants · 32 columns (131072) is no model's; the constants would not fit.
  if (blocks > kTokenConstants) __builtin_trap();
  alignas(32) float h[kTokenConstants];
  alignas(32) int32_t c[kTokenConstants];
  alignas(32) __m256i u_buf[kMaxBufferedBlocks * 8];
  alignas(32) __m256 dw_buf[kMaxBufferedBlocks];
  const auto* codes = static_cast<const uint8_t*>(w.data);
  const auto* scales = static_cast<const uint8_t*>(w.scales);
  // Runs of tokens whose constants fit; each run passes over every row group once.
  size_t run = blocks == 0 ? x.m : kTokenConstants / blocks;
  if (run > static_cast<size_t>(kTile)) run -= run % kTile;
  for (size_t t0 = 0; t0 < x.m; t0 += run) {
    const size_t n = x.m - t0 < run ? x.m - t0 : run;
    for (size_t t = 0; t < n; ++t)
      for (size_t b = 0; b < blocks; ++b) {
        h[t * blocks + b] = 0.5f * x.d[(t0 + t) * x.ldd + b];
        c[t * blocks + b] = 12 * x.sum[(t0 + t) * x.ldd + b];
      }
    const TokenBlock xt{x.q + t0 * x.ldq, x.ldq, h, c, blocks};
    // Decoding a group once per run pays when the run has more than one tile of tokens.
    const bool buffered = n > static_cast<size_t>(kTile) && blocks <= kMaxBufferedBlocks;
    size_t g = 0;
    if (n == 1) {  // decode: the full groups in pairs (j, j + half), two streams at once
      const size_t half = w.rows / kGroupRows / 2;
      for (size_t j = 0; j < half; ++j)
        GroupPair1(
            GroupCodes{codes + j * w.row_stride, scales + j * w.scale_stride},
            GroupCodes{codes + (j + half) * w.row_stride, scales + (j + half) * w.scale_stride},
            blocks, xt, y + t0 * ldy + j * kGroupRows, y + t0 * ldy + (j + half) * kGroupRows,
            accumulate);
      g = 2 * half;
    }
    for (; g < groups; ++g) {
      const size_t rows =
          w.rows - g * kGroupRows < kGroupRows ? w.rows - g * kGroupRows : kGroupRows;
      const GroupCodes gc{codes + g * w.row_stride, scales + g * w.scale_stride};
      float* yg = y + t0 * ldy + g * kGroupRows;
      if (buffered) {
        DecodeGroup(gc, blocks, u_buf, dw_buf);
        GroupTokens(GroupBuffer{u_buf, dw_buf}, blocks, xt, n, yg, ldy, rows, accumulate);
      } else {
        GroupTokens(gc, blocks, xt, n, yg, ldy, rows, accumulate);
      }
    }
  }
}

}  // namespace moeserve::kernels::avx2
