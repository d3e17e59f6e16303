// AVX-512 VNNI kernel of mxfp4_i8.h: the MXFP4 × Q8 matmul with vpdpbusd (built with the
// AVX-512 flags and -mavx512vnni, no BF16: the avx512, avx512bf16 and amx tables run it).
// Bit-identical to MatMulMxfp4I8Reference, as the AVX2 kernel is: the integer block dot products
// are exact, and the per-block f32 steps are the reference's own operations in the same order (or,
// where ExponentWindow allows, an integer exponent add that gives the same bits as the reference's
// multiply).
//
// Why a kernel of its own: the AVX2 kernel spends ~33 instructions per 256 multiply-adds per
// token (vpmaddubsw, vpmaddwd, int16 adds, broadcasts). Here one vpdpbusd does 64 multiply-adds
// into int32, so a 16-row × 32-column block costs 8 of them, 4 activation broadcasts and 5 other
// steps per token in a prefill tile (lane swap, chain add, scale, convert, fmadd).
//
// Layout: the repacked groups are 8 rows (one int32 lane per row in a 256-bit chunk), so a zmm
// holds the same chunk of two consecutive groups, g in the low half and g + 1 in the high half:
// the same 4 activation bytes apply to all 16 lanes (the decode path; the prefill tile permutes
// the lanes so that 8 bytes apply, see BlockDot). Codes map to u = 2·e2m1 + 12 (unsigned, as
// on AVX2) and S = Σ u·q − 12·Σ q is the signed dot; |Σ u·q| ≤ 32 · 24 · 127 fits int32 easily.
#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "kernels/e8m0_avx512.h"
#include "kernels/exponent_window.h"
#include "kernels/internal.h"
#include "kernels/side_by_side.h"

namespace moeserve::kernels::avx512 {
namespace {

constexpr size_t kBlock = kMxfp4I8Block;
constexpr size_t kGroupRows = kMxfp4I8GroupRows;
constexpr size_t kBlockCodeBytes = 128;
constexpr size_t kPairRows = 2 * kGroupRows;
// Per-token, per-block constants (0.5·d and −12·sum) precomputed for a run of tokens.
constexpr size_t kTokenConstants = 4096;
// Tokens per pass over a block's decoded weights: 8 weight registers + 16 f32 accumulators (the
// integer sums live only within one token's step); a run's tail goes by 8 and then 1-7.
constexpr int kTile = 16;

inline __m512i Broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

inline __m512i Broadcast8(const int8_t* p) {
  long long v;
  std::memcpy(&v, p, 8);
  return _mm512_set1_epi64(v);
}

// Token constants of one block: h = 0.5f·d (the reference's factor) and c = −12·sum (the offset
// of u), for tokens t of a run at h[t·stride], c[t·stride]; hb = ShiftableBits(h), for the
// exponent-add scale (exponent_window.h).
struct TokenBlock {
  const int8_t* q;  // token 0's 32 activations of the block
  size_t ldq;
  const float* h;
  const int32_t* hb;
  const int32_t* c;
  size_t stride;
};

// Two row groups (or one: `second` false, the high half zero) read block by block.
struct GroupPair {
  const uint8_t* codes;   // group g's codes; group g + 1's at codes + code_stride
  const uint8_t* scales;  // likewise scales + scale_stride
  size_t code_stride, scale_stride;
  bool second;

  // Requests both groups' codes `kAhead` blocks (16 KiB per group) ahead into L2: at
  // small m the kernel streams W from DRAM. Measured on Zen 4 (bench_mxfp4_i8 --m 1, per-run
  // ratio to the read probe, 3 rounds): no software prefetch 58-76%, 32 or 64 blocks ahead into
  // L1 53-295% (erratic), 128 blocks ahead into L2 81-94%, 256 into L2 84-90%.
  // The scales (1/16 of the bytes, 8 per block and group) are requested the same distance ahead
  // in their own stream: the hardware prefetcher does not run ahead of so sparse a stream, and a
  // scale that misses to DRAM stalls the block's FMAs until the core's window is full. With it,
  // prefill tiles from DRAM (bench/kernels/ab/run.sh --whole, Zen 5, 2 threads) run 1.11-1.13x
  // faster at 9-16 tokens and 1.06x at 24; from the LLC the same. (Zen 4, at one token, before
  // the decode had PairStream: scales prefetched measured 57-78% of the probe, without 81-94%.)
  //
  // The address runs linearly over the matrix, not per group: a pair's two groups are
  // consecutive (code_stride apart) and the next pair follows, so at block b of a pair the
  // kernel has consumed about 2·b blocks' codes of one contiguous stream, and 16 KiB past that
  // point is what it reads next, across pair boundaries too (per-group addresses fell into the
  // other group, already streaming, and left the next pair unrequested).
  // always_inline: GCC counts prefetches as free of side effects, so at -O2 it judged the calls of
  // this function (not inlined early) dead and removed them (none left in PairTile's -O2 code;
  // -O3, the Release flags, inlined it first).
  [[gnu::always_inline]] void Prefetch(size_t b) const {
    constexpr size_t kAheadBytes = 16384;
    const size_t groups = second ? 2 : 1;
    const char* c =
        reinterpret_cast<const char*>(codes + groups * b * kBlockCodeBytes) + kAheadBytes;
    _mm_prefetch(c, _MM_HINT_T1);
    _mm_prefetch(c + 64, _MM_HINT_T1);
    if (second) {
      _mm_prefetch(c + 128, _MM_HINT_T1);
      _mm_prefetch(c + 192, _MM_HINT_T1);
    }
    // The scales: a line per 64 bytes consumed (every 4th block of a pair), as far ahead in time.
    if (b % 4 == 0)
      _mm_prefetch(reinterpret_cast<const char*>(scales + groups * b * kGroupRows) +
                       kAheadBytes / (kBlockCodeBytes / kGroupRows),
                   _MM_HINT_T1);
  }

  // Chunk c (32 bytes) of block b of group g in the low half, of group g + 1 in the high half
  // (zeros for a lone group).
  template <bool kSecond>
  __m512i ChunkAs(size_t b, int c) const {
    const uint8_t* p = codes + b * kBlockCodeBytes + 32 * c;
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return kSecond ? _mm512_inserti64x4(
                         _mm512_castsi256_si512(lo),
                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + code_stride)), 1)
                   : _mm512_zextsi256_si512(lo);
  }
  // e2m1 code → u = 2·e2m1 + 12, for vpshufb in every 128-bit lane.
  static __m512i CodeLut() {
    return _mm512_broadcast_i32x4(
        _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
  }

  // Block b (PairStream's lane order: lane r row r of group g, lane 8 + r of group g + 1):
  // u[2c] / u[2c + 1] = the low / high nibbles of chunk c (columns 8c .. 8c + 3 / 8c + 4 ..
  // 8c + 7) of both groups, as u = 2·e2m1 + 12.
  template <bool kSecond>
  void DecodeAs(size_t b, __m512i u[8]) const {
    const __m512i lut = CodeLut(), nibble = _mm512_set1_epi8(0x0f);
    for (int c = 0; c < 4; ++c) {
      const __m512i v = ChunkAs<kSecond>(b, c);
      u[2 * c] = _mm512_shuffle_epi8(lut, _mm512_and_si512(v, nibble));
      u[2 * c + 1] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble));
    }
  }

  // Block b for the prefill tile's lane order (PairTile): lane 2r is row r (group g), lane 2r + 1
  // row r + 8 (group g + 1). For octet c (columns 8c .. 8c + 7) w[2c] holds row r's columns
  // 8c .. 8c + 3 in lane 2r and row r + 8's 8c + 4 .. 8c + 7 in lane 2r + 1; w[2c + 1] the other
  // halves (row r + 8's first four in lane 2r, row r's last four in lane 2r + 1). So one 8-byte
  // broadcast of a token's octet (its first four bytes in even lanes, the last four in odd ones)
  // feeds both, and w[2c + 1]'s sums, lane pairs swapped, add to w[2c]'s into whole rows.
  template <bool kSecond>
  void DecodeInterleavedAs(size_t b, __m512i u[8]) const {
    const __m512i lut = CodeLut(), nibble = _mm512_set1_epi8(0x0f);
    const __m512i interleave =
        _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    const __m512i odd_high = _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);
    for (int c = 0; c < 4; ++c) {
      const __m512i v = ChunkAs<kSecond>(b, c);
      const __m512i p0 = _mm512_permutexvar_epi32(interleave, v);
      const __m512i p1 = _mm512_shuffle_epi32(p0, _MM_PERM_CDAB);
      u[2 * c] =
          _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srlv_epi32(p0, odd_high), nibble));
      u[2 * c + 1] =
          _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srlv_epi32(p1, odd_high), nibble));
    }
  }

  // The e8m0 bytes of block b: group g's 8 rows, then group g + 1's.
  template <bool kSecond>
  __m128i ScaleBytesAs(size_t b) const {
    const uint8_t* s = scales + b * kGroupRows;
    const __m128i lo = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s));
    return kSecond ? _mm_unpacklo_epi64(
                         lo, _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + scale_stride)))
                   : lo;
  }
  // The same in the tile's lane order (row r, then row r + 8; zeros for a lone group's second).
  __m128i ScaleBytesInterleaved(size_t b) const {
    const uint8_t* s = scales + b * kGroupRows;
    const __m128i lo = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s));
    return _mm_unpacklo_epi8(
        lo, second ? _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + scale_stride))
                   : _mm_setzero_si128());
  }

  // The 16 rows' scales of block b, 2^(e − 127) in f32 as E8M0ToFloat.
  __m512 ScalesInterleaved(size_t b) const { return ScalesOf(ScaleBytesInterleaved(b)); }
  static __m512 ScalesOf(__m128i e) { return E8m0ToF32x16(e); }
  template <bool kSecond>
  __m512 ScalesAs(size_t b) const {
    return ScalesOf(ScaleBytesAs<kSecond>(b));
  }

  // Whether every row of block b has its e within the window; if so, *shift = (e − 127) << 23
  // per lane, in the tile's lane order (the exponent-add scale). A lone group's odd lanes (the
  // absent group g + 1) are not looked at: they are never stored.
  bool ExponentShift(size_t b, const __m128i lo, const __m128i hi, __m512i* shift) const {
    const __m128i e = ScaleBytesInterleaved(b);
    const __mmask16 lanes = second ? 0xffff : 0x5555;
    if ((_mm_cmplt_epu8_mask(e, lo) | _mm_cmpgt_epu8_mask(e, hi)) & lanes) return false;
    *shift = _mm512_sub_epi32(_mm512_slli_epi32(_mm512_cvtepu8_epi32(e), 23),
                              _mm512_set1_epi32(127 << 23));
    return true;
  }
};

// acc[t] = fmaf(float(S), dw · h, acc[t]) for T tokens and one block in the tile's lane order
// (DecodeInterleavedAs), S the exact dot of u − 12 and q: the vpdpbusd chain starts from −12·Σq
// instead of subtracting it after. Each dot runs as two chains (the two halves of every row) so
// that vpdpbusd's latency does not bound the tile; integer sums are exact in any order.
// kShift: the scale by ExponentShift's add (dws), else dw · h.
// Why 8-byte broadcasts: the tile is bound by its loads, not its vpdpbusd. A token's step was 10
// loads (8 broadcasts of 4 activation bytes, the offset, the scale) beside 8 vpdpbusd; Zen 5
// issues two such loads a cycle, and a microbenchmark of the step ran 1.25x faster with half the
// broadcasts. Now 4 broadcasts of 8 bytes serve the 8 vpdpbusd, for one in-lane shuffle of the
// second chain per token and a permute of the codes per block (amortized over the tile's tokens).
// bench/kernels/ab/run.sh, Zen 5: 1.04-1.07x from the LLC / L2 at 9-16 tokens, 1.02-1.03x from
// DRAM; the same bits.
template <int T, bool kShift>
inline void BlockDot(const __m512i u[8], const __m512 dw, const __m512i dws, const TokenBlock& x,
                     size_t b, __m512 acc[T]) {
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    const int8_t* q = x.q + t * x.ldq + b * kBlock;
    const __m512i q0 = Broadcast8(q);
    __m512i s0 = _mm512_dpbusd_epi32(_mm512_set1_epi32(x.c[t * x.stride + b]), u[0], q0);
    __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[1], q0);
#pragma GCC unroll 4
    for (int c = 1; c < 4; ++c) {
      const __m512i qc = Broadcast8(q + 8 * c);
      s0 = _mm512_dpbusd_epi32(s0, u[2 * c], qc);
      s1 = _mm512_dpbusd_epi32(s1, u[2 * c + 1], qc);
    }
    s1 = _mm512_shuffle_epi32(s1, _MM_PERM_CDAB);
    const __m512 scale =
        kShift
            ? _mm512_castsi512_ps(_mm512_add_epi32(dws, _mm512_set1_epi32(x.hb[t * x.stride + b])))
            : _mm512_mul_ps(dw, _mm512_set1_ps(x.h[t * x.stride + b]));
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), scale, acc[t]);
  }
}

// T tokens × one group pair over all blocks, in block order (the reference's order); `rows` ≤ 16
// of the pair's rows are stored (= or +=), token t at y + t·ldy.
template <int T>
void PairTile(const GroupPair& w, size_t blocks, const TokenBlock& x, ExponentWindow window,
              float* y, size_t ldy, size_t rows, bool accumulate) {
  __m512 acc[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const __m128i lo = _mm_set1_epi8(static_cast<char>(window.lo)),
                hi = _mm_set1_epi8(static_cast<char>(window.hi));
  for (size_t b = 0; b < blocks; ++b) {
    w.Prefetch(b);
    __m512i u[8];
    w.second ? w.DecodeInterleavedAs<true>(b, u) : w.DecodeInterleavedAs<false>(b, u);
    __m512i dws;
    if (w.ExponentShift(b, lo, hi, &dws))
      BlockDot<T, true>(u, _mm512_setzero_ps(), dws, x, b, acc);
    else
      BlockDot<T, false>(u, w.ScalesInterleaved(b), dws, x, b, acc);
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1);
  const __m512i rows_order =
      _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    float* out = y + t * ldy;
    const __m512 a = _mm512_permutexvar_ps(rows_order, acc[t]);
    const __m512 v = accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(mask, out), a) : a;
    _mm512_mask_storeu_ps(out, mask, v);
  }
}

using TileFn = void (*)(const GroupPair&, size_t, const TokenBlock&, ExponentWindow, float*, size_t,
                        size_t, bool);
// Tiles of every size 1 .. kTile, so that a run of n tokens goes in ceil(n / 16) passes of nearly
// equal size (9 = one pass of 9, 17 = 9 + 8) rather than 16s, an 8 and a 1-7 tail: each pass
// decodes the block's codes again, and prefill's experts get 1-40 tokens each.
constexpr TileFn kTiles[kTile + 1] = {
    nullptr,      PairTile<1>,  PairTile<2>,  PairTile<3>,  PairTile<4>,  PairTile<5>,
    PairTile<6>,  PairTile<7>,  PairTile<8>,  PairTile<9>,  PairTile<10>, PairTile<11>,
    PairTile<12>, PairTile<13>, PairTile<14>, PairTile<15>, PairTile<16>};

// Tokens [0, n) of a run against one group pair, in ceil(n / kTile) tiles as equal as can be.
void PairTokens(const GroupPair& w, size_t blocks, TokenBlock x, ExponentWindow window, size_t n,
                float* y, size_t ldy, size_t rows, bool accumulate) {
  const size_t passes = (n + kTile - 1) / kTile;
  for (size_t p = 0, t = 0; p < passes; ++p) {
    const size_t tokens = (n - t + (passes - p) - 1) / (passes - p);  // ceil(left / passes left)
    kTiles[tokens](w, blocks, x, window, y + t * ldy, ldy, rows, accumulate);
    t += tokens;
    x.q += tokens * x.ldq;
    x.h += tokens * x.stride;
    x.hb += tokens * x.stride;
    x.c += tokens * x.stride;
  }
}

// Decode of 2-4 tokens (the few tokens a batch routes to one expert; one token: GroupStreams),
// the full group pairs two at a time: 32 rows per pass over the blocks, four streams. Per token
// and row the arithmetic is BlockDot<T, false>'s (the reference's multiply), so y is the same bits
// whichever path computes it.
//
// Why a path of its own: at one token PairTile<1> streams ~32 GB/s from DRAM where a plain read
// of the same bytes gets ~55 (Zen 5, 2 threads, decode's pattern of 16 expert matrices per thread;
// A/B interleaved call by call, -O3). Here 36-38 GB/s: 1.16-1.18x at 1 token, 1.15x at 4. (The
// 1.8x first measured was against an -O2 build in which GCC had dropped PairTile's prefetches;
// see GroupPair::Prefetch.)
//  - each of the four groups is prefetched as a stream of its own, kStreamAhead bytes on, and
//    past its end the same group of the next quad (PairTile keeps one linear address per pair;
//    its scheme at 16 tokens measured the same as per-group streams, -O3); 2-12 KiB ahead
//    measured the same, none 0.73x;
//  - the next quad's scales are requested when a quad starts (+10-14%): 8 bytes per block and
//    group are too sparse a stream for the hardware prefetcher to run ahead of;
//  - a token's 8 activation broadcasts and block constants are loaded once for both pairs, and
//    no test of a lone last group remains in the loop (LLC-resident: 1.25x the compute rate).
// Both pairs' decoded codes (16 registers) serve every token, so T stops at 4.
// (vpermb for the nibble lookup, AVX512_VBMI, measured +1-2%: not worth requiring it.)
constexpr size_t kStreamAhead = 4096;

template <int T>
void PairStream(const GroupPair& w0, const GroupPair& w1, size_t blocks, const TokenBlock& x,
                float* y, size_t ldy, bool accumulate) {
  __m512 acc0[T], acc1[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc0[t] = acc1[t] = _mm512_setzero_ps();
  const size_t group_bytes = blocks * kBlockCodeBytes, scale_bytes = blocks * kGroupRows;
  for (int g = 4; g < 8; ++g) {  // the next quad's scales (harmless past the matrix's end)
    const char* s = reinterpret_cast<const char*>(w0.scales) + g * w0.scale_stride;
    for (size_t o = 0; o < scale_bytes; o += 64) _mm_prefetch(s + o, _MM_HINT_T1);
  }
  for (size_t b = 0; b < blocks; ++b) {
    {
      size_t ahead = b * kBlockCodeBytes + kStreamAhead;
      if (ahead >= group_bytes) ahead += 3 * w0.code_stride;
      const char* p = reinterpret_cast<const char*>(w0.codes) + ahead;
      for (int g = 0; g < 4; ++g) {
        const char* c = p + (g & 1) * w0.code_stride + (g >> 1) * (w1.codes - w0.codes);
        _mm_prefetch(c, _MM_HINT_T1);
        _mm_prefetch(c + 64, _MM_HINT_T1);
      }
    }
    __m512i u0[8], u1[8];
    w0.DecodeAs<true>(b, u0);
    w1.DecodeAs<true>(b, u1);
    const __m512 dw0 = w0.ScalesAs<true>(b), dw1 = w1.ScalesAs<true>(b);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const int8_t* q = x.q + t * x.ldq + b * kBlock;
      // The even chains start from −12·Σq (as BlockDot); integer sums are exact in any order.
      __m512i a0 = _mm512_set1_epi32(x.c[t * x.stride + b]), b0 = a0;
      __m512i a1 = _mm512_setzero_si512(), b1 = a1;
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m512i lo = Broadcast4(q + 8 * c), hi = Broadcast4(q + 8 * c + 4);
        a0 = _mm512_dpbusd_epi32(a0, u0[2 * c], lo);
        a1 = _mm512_dpbusd_epi32(a1, u0[2 * c + 1], hi);
        b0 = _mm512_dpbusd_epi32(b0, u1[2 * c], lo);
        b1 = _mm512_dpbusd_epi32(b1, u1[2 * c + 1], hi);
      }
      const __m512 h = _mm512_set1_ps(x.h[t * x.stride + b]);
      acc0[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a0, a1)), _mm512_mul_ps(dw0, h),
                                acc0[t]);
      acc1[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(b0, b1)), _mm512_mul_ps(dw1, h),
                                acc1[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    float* out = y + t * ldy;
    if (accumulate) {
      acc0[t] = _mm512_add_ps(_mm512_loadu_ps(out), acc0[t]);
      acc1[t] = _mm512_add_ps(_mm512_loadu_ps(out + kPairRows), acc1[t]);
    }
    _mm512_storeu_ps(out, acc0[t]);
    _mm512_storeu_ps(out + kPairRows, acc1[t]);
  }
}

// One token (a sequence's decode step) × whole row groups: N groups far apart side by side, each
// over all its blocks in order (the reference's arithmetic, so the same bits as every other path).
//
// Why: consecutive groups are contiguous, so each of the N walks reads its run of groups as one
// sequential stream, which the hardware prefetchers follow without requests of our own, where
// PairStream reads a quad's four groups side by side (four 12 KiB streams that restart every
// 48 KiB) and needs its L2 requests to keep them fed, which capped it. Zen 4, 2 threads, huge
// pages: plain reads in a decode step's pattern (8 experts' 0.6-1.2 MB shares) against one long
// run when the host gave ~58 GB/s: four streams in step 0.73x (0.82x with the requests), one
// sequential run per share 0.95x. MoeExperts at one token (bench_mxfp4_i8's decode shapes),
// in-process A/B against the read probe of the same bytes: PairStream 0.73-0.75x, one stream
// 0.69-0.77x, two 0.87-0.89x, four 0.83-0.84x in a fast host state (~55-61 GB/s); 0.94x / 0.95x /
// 0.99x / - in a slow one (~34 GB/s).
// One group fills a ymm (lane r: row r): at one token the kernel is bound by memory, not by
// vpdpbusd, and per weight byte the 256-bit ops cost a Zen 4 core what PairStream's 512-bit
// ones do (each is two 256-bit passes there). The 4 activation bytes of each vpdpbusd are an
// embedded broadcast.
template <size_t N>
void GroupStreams(const uint8_t* const codes[N], const uint8_t* const scales[N], size_t blocks,
                  const TokenBlock& x, float* const y[N], bool accumulate) {
  const __m256i lut = _mm512_castsi512_si256(GroupPair::CodeLut());
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  __m256 acc[N];
  for (size_t n = 0; n < N; ++n) acc[n] = _mm256_setzero_ps();
  for (size_t b = 0; b < blocks; ++b) {
    const int8_t* q = x.q + b * kBlock;
    const __m256 h = _mm256_set1_ps(x.h[b]);
#pragma GCC unroll 2
    for (size_t n = 0; n < N; ++n) {
      const uint8_t* cb = codes[n] + b * kBlockCodeBytes;
      // Two chains (low / high nibbles) so that vpdpbusd's latency does not bound the block.
      __m256i s0 = _mm256_set1_epi32(x.c[b]), s1 = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cb + 32 * c));
        const __m256i lo = _mm256_shuffle_epi8(lut, _mm256_and_si256(v, nibble));
        const __m256i hi =
            _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble));
        int32_t q0, q1;
        std::memcpy(&q0, q + 8 * c, 4);
        std::memcpy(&q1, q + 8 * c + 4, 4);
        s0 = _mm256_dpbusd_epi32(s0, lo, _mm256_set1_epi32(q0));
        s1 = _mm256_dpbusd_epi32(s1, hi, _mm256_set1_epi32(q1));
      }
      // dw = 2^(e − 127), times h: the reference's multiply.
      const __m256 dw = E8m0ToF32x8(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales[n] + b * kGroupRows)));
      acc[n] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), _mm256_mul_ps(dw, h),
                               acc[n]);
    }
  }
  for (size_t n = 0; n < N; ++n) {
    if (accumulate) acc[n] = _mm256_add_ps(_mm256_loadu_ps(y[n]), acc[n]);
    _mm256_storeu_ps(y[n], acc[n]);
  }
}

// `groups` whole groups from codes / scales: the first and second halves side by side, an odd
// last group alone.
void GroupStream1(const uint8_t* codes, const uint8_t* scales, size_t code_stride,
                  size_t scale_stride, size_t groups, size_t blocks, const TokenBlock& x, float* y,
                  bool accumulate) {
  const auto run = [&]<size_t N>(const std::array<size_t, N>& g) {
    const uint8_t* cs[N];
    const uint8_t* ss[N];
    float* ys[N];
    for (size_t n = 0; n < N; ++n) {
      cs[n] = codes + g[n] * code_stride;
      ss[n] = scales + g[n] * scale_stride;
      ys[n] = y + g[n] * kGroupRows;
    }
    GroupStreams<N>(cs, ss, blocks, x, ys, accumulate);
  };
  const size_t done = ForEachSideBySide<2>(0, groups, run);
  if (done < groups) run(std::array<size_t, 1>{done});
}

using StreamFn = void (*)(const GroupPair&, const GroupPair&, size_t, const TokenBlock&, float*,
                          size_t, bool);
constexpr int kStreamTokens = 4;
constexpr StreamFn kStreams[kStreamTokens + 1] = {nullptr, nullptr, PairStream<2>, PairStream<3>,
                                                  PairStream<4>};

}  // namespace

void MatMulMxfp4I8(const Q8Rows& x, const WeightMatrix& w, float* y, size_t ldy, bool accumulate) {
  const size_t blocks = x.k / kBlock, groups = (w.rows + kGroupRows - 1) / kGroupRows;
  if (x.m == 0 || w.rows == 0) return;
  // k beyond kTokenConstants · 32 columns (131072) is no model's; the constants would not fit.
  if (blocks > kTokenConstants) __builtin_trap();
  alignas(64) float h[kTokenConstants];
  alignas(64) int32_t hb[kTokenConstants];
  alignas(64) int32_t c[kTokenConstants];
  const auto* codes = static_cast<const uint8_t*>(w.data);
  const auto* scales = static_cast<const uint8_t*>(w.scales);
  // Runs of tokens whose constants fit; each run passes over every group pair once.
  size_t run = blocks == 0 ? x.m : kTokenConstants / blocks;
  if (run > static_cast<size_t>(kTile)) run -= run % kTile;
  for (size_t t0 = 0; t0 < x.m; t0 += run) {
    const size_t n = x.m - t0 < run ? x.m - t0 : run;
    for (size_t t = 0; t < n; ++t)
      for (size_t b = 0; b < blocks; ++b) {
        h[t * blocks + b] = 0.5f * x.d[(t0 + t) * x.ldd + b];
        hb[t * blocks + b] = ShiftableBits(h[t * blocks + b]);
        c[t * blocks + b] = -12 * x.sum[(t0 + t) * x.ldd + b];
      }
    const TokenBlock xt{x.q + t0 * x.ldq, x.ldq, h, hb, c, blocks};
    const ExponentWindow window = ExponentWindow::Of(hb, n * blocks);
    size_t g = 0;
    if (n == 1) {  // a sequence's decode step: every whole group
      g = w.rows / kGroupRows;
      GroupStream1(codes, scales, w.row_stride, w.scale_stride, g, blocks, xt, y + t0 * ldy,
                   accumulate);
    } else if (n <= kStreamTokens) {  // decode: whole quads of groups (32 rows), the rest below
      for (; (g + 4) * kGroupRows <= w.rows; g += 4) {
        const GroupPair a{codes + g * w.row_stride, scales + g * w.scale_stride, w.row_stride,
                          w.scale_stride, true};
        GroupPair b = a;
        b.codes += 2 * w.row_stride;
        b.scales += 2 * w.scale_stride;
        kStreams[n](a, b, blocks, xt, y + t0 * ldy + g * kGroupRows, ldy, accumulate);
      }
    }
    for (; g < groups; g += 2) {
      const bool second = g + 1 < groups;
      const size_t left = w.rows - g * kGroupRows;
      const GroupPair pair{codes + g * w.row_stride, scales + g * w.scale_stride, w.row_stride,
                           w.scale_stride, second};
      PairTokens(pair, blocks, xt, window, n, y + t0 * ldy + g * kGroupRows, ldy,
                 left < kPairRows ? left : kPairRows, accumulate);
    }
  }
}

}  // namespace moeserve::kernels::avx512
