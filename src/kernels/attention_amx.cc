// Attention tile on the AMX tile unit (built with the AMX flags): both products of the online
// softmax, q·K and P·V, as TDPBF16PS, at f32 accuracy.
//
// The tile unit multiplies bf16 values exactly and sums in f32; K and V are bf16 (or e4m3 codes,
// exact in bf16), but q and the softmax weights P are f32. Each is split into three bf16 parts
// with hi + mid + lo = x exactly (Split32), and the three products go into the same f32
// accumulator: the result is the f32 dot product up to summation order, as the AVX-512 tile's
// (only values below ~2^-110, which the tile unit flushes to zero, are lost). Three times the tile
// work of a bf16 product, and still several times the f32 FMAs' rate.
//
// Everything is computed transposed, so that a row of the work item (query of the tile x q head
// of the group) is a vector lane and the softmax needs no horizontal sums:
//   S^T [keys][rows] = K · Q^T   A: 16 K rows x 32 dims, straight from a bf16 cache block (or
//                                decoded / gathered rows); B: q's parts transposed, once per item
//   online softmax on S^T        per key a vector of 16 rows: masks, max, e^(s − max) and sums
//                                are lane-wise; P's parts are packed as key pairs (B tiles)
//   O^T [dims][rows] += V^T · P^T   A: V transposed per chunk (key pairs interleaved, then a 16 x
//                                16 dword transpose), shared by all row blocks; C: O^T per block
// Keys go in chunks of 64 (four 16-key blocks of S^T; two 32-key steps of P·V). The tile
// products are issued a few at a time between the vector work they do not depend on (a row
// block's softmax runs between the previous block's P·V and the next block's scores), so that
// the tile unit and the vector units work at once (ScoreUnits, PvUnits).
// A single row block (decode: a query's q heads) keeps O row-major instead, O += P·V with P's
// tiles transposed and V's key pairs only interleaved (no transposes of V); its softmax of chunk
// c runs between the scores of chunk c + 1, and its P·V between the V pairs of chunk c + 1.
// FP8 caches: codes decoded to exact bf16 rows by byte tables (RowDecoder); a key's scale
// multiplies its score, a value's its weight in P (the same real products as dequantizing first,
// each rounded once in f32).
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/amx_tiles.h"
#include "kernels/attention_prefetch.h"
#include "kernels/fp8_bytes_to_bf16_avx512.h"
#include "kernels/internal.h"
#include "kernels/scratch.h"
#include "kernels/simd_math_avx512.h"
#include "kernels/transpose_avx512.h"

namespace moeserve::kernels::amx {
namespace {

constexpr size_t kChunk = 64;          // keys per chunk
constexpr size_t kKeyBlocks = 4;       // 16-key blocks of S^T per chunk (C tiles 0-3)
constexpr size_t kKeySteps = 2;        // 32-key steps of P · V per chunk
constexpr size_t kParts = 3;           // bf16 parts per f32 value
constexpr size_t kTile = 256;          // uint32 per 1 KiB tile
constexpr size_t kPrefetchChunks = 1;  // K and V rows this many chunks ahead into L2

// Two vectors of 16 f32 (x0: values 0-15, x1: 16-31) -> three rows of 32 bf16 with
// hi + mid + lo = x exactly: hi keeps x's top 8 significant bits (truncated), the remainder
// x − hi is exact in f32 with at most 16, its top 8 are mid, and what is left (at most 8) is lo,
// exact in bf16. Each part's 32 bf16 are the high halves of its f32s, gathered by one vpermt2w.
inline void Split32(__m512 x0, __m512 x1, __m512i part[kParts]) {
  const __m512 top = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(0xffff0000u)));
  const __m512i high_words =
      _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                       25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const __m512 h0 = _mm512_and_ps(x0, top), h1 = _mm512_and_ps(x1, top);
  const __m512 r0 = _mm512_sub_ps(x0, h0), r1 = _mm512_sub_ps(x1, h1);
  const __m512 m0 = _mm512_and_ps(r0, top), m1 = _mm512_and_ps(r1, top);
  const __m512 l0 = _mm512_sub_ps(r0, m0), l1 = _mm512_sub_ps(r1, m1);
  part[0] = _mm512_permutex2var_epi16(_mm512_castps_si512(h0), high_words, _mm512_castps_si512(h1));
  part[1] = _mm512_permutex2var_epi16(_mm512_castps_si512(m0), high_words, _mm512_castps_si512(m1));
  part[2] = _mm512_permutex2var_epi16(_mm512_castps_si512(l0), high_words, _mm512_castps_si512(l1));
}

// The same split for two keys' weights of 16 rows (lanes), packed as B tile rows of P^T: dword n
// of part p holds part p of a[n] (low half) and of b[n] (high half).
inline void SplitPair(__m512 a, __m512 b, __m512i part[kParts]) {
  const __m512i top = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  const __m512 ha = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), top));
  const __m512 hb = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(b), top));
  const __m512 ra = _mm512_sub_ps(a, ha), rb = _mm512_sub_ps(b, hb);
  const __m512 ma = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(ra), top));
  const __m512 mb = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(rb), top));
  const __m512 la = _mm512_sub_ps(ra, ma), lb = _mm512_sub_ps(rb, mb);
  // (x >> 16) | (y & top): 0xF8 = A | (B & C) with A = x >> 16, B = y, C = top.
  auto pack = [&](__m512 x, __m512 y) {
    return _mm512_ternarylogic_epi32(_mm512_srli_epi32(_mm512_castps_si512(x), 16),
                                     _mm512_castps_si512(y), top, 0xF8);
  };
  part[0] = pack(ha, hb);
  part[1] = pack(ma, mb);
  part[2] = pack(la, lb);
}

// The work item's scratch, carved from one buffer (each part 64-byte aligned). rp: rows rounded
// up to 16; d: head_dim (a multiple of 32); steps = d / 32; db = d / 16.
struct Buffers {
  uint16_t* qa;    // [kParts][rp][d] bf16: q's parts, row-major (input of the transposes)
  uint32_t* qt;    // [rp / 16][steps][kParts] tiles: B tiles of Q^T
  uint16_t* krow;  // [kChunk][d] bf16: K rows decoded or gathered (A tiles of K)
  uint16_t* vrow;  // [kChunk][d] bf16: V rows decoded (FP8)
  uint32_t* vt;    // [2][db][kKeySteps] tiles: A tiles of V^T (or B tiles of V), two chunks'
  float* st;       // [2][kChunk][16]: S^T of a row block (two, for the pipelining)
  uint32_t* pt;    // [kKeySteps][kParts] tiles: B tiles of P^T for one row block
  float* ot;       // [rp / 16][db] tiles: O^T, C tiles
  float* max;      // [rp]
  float* sum;      // [rp]
  int32_t* pos;    // [rp]: each row's query position (−1: padding)
  float* kscale;   // FP8: [2][kChunk] per-key scales of K and V, two chunks'
  float* vscale;

  Buffers(ScratchBuffer& buf, size_t rp, size_t d) {
    const size_t blocks = rp / 16, steps = d / 32, db = d / 16;
    const size_t bytes[13] = {kParts * rp * d * 2,
                              blocks * steps * kParts * kTile * 4,
                              kChunk * d * 2,
                              kChunk * d * 2,
                              2 * db * kKeySteps * kTile * 4,
                              2 * kChunk * 16 * 4,
                              kKeySteps * kParts * kTile * 4,
                              blocks * db * kTile * 4,
                              rp * 4,
                              rp * 4,
                              rp * 4,
                              2 * kChunk * 4,
                              2 * kChunk * 4};
    size_t total = 0;
    for (size_t b : bytes) total += (b + 63) / 64 * 64;
    auto* p = static_cast<char*>(buf.Get(total));
    void* const parts[13] = {&qa, &qt,  &krow, &vrow, &vt,     &st,    &pt,
                             &ot, &max, &sum,  &pos,  &kscale, &vscale};
    for (size_t i = 0; i < 13; ++i) {
      std::memcpy(parts[i], &p, sizeof(p));
      p += (bytes[i] + 63) / 64 * 64;
    }
  }
};

// V^T A tiles: tile (db, ks) row n = dim n of the 16-dim block, dword i = keys 32 ks + 2i and
// + 2i + 1 (low, high). Key pairs are interleaved by unpacklo / unpackhi, which work within 128-bit
// lanes: a 32-dim step's pair dwords come out as dims {0-3, 8-11, 16-19, 24-27} (db even) and
// {4-7, 12-15, 20-23, 28-31} (db odd), so O^T's rows are in that order (StoreBlock undoes it).
// Then one 16 x 16 dword transpose per tile. Keys ≥ nk are zero (their P is zero too, but garbage
// bits could be NaN).
void BuildValueTiles(const uint16_t* const rows[kChunk], size_t nk, size_t d, uint32_t* vt) {
  const size_t n_ks = (nk + 31) / 32;
  for (size_t ks = 0; ks < n_ks; ++ks)
    for (size_t j = 0; j < d; j += 32) {
      __m512i lo[16], hi[16];
      for (size_t i = 0; i < 16; ++i) {
        const size_t k = ks * 32 + 2 * i;
        const __m512i a = k < nk ? _mm512_loadu_si512(rows[k] + j) : _mm512_setzero_si512();
        const __m512i b = k + 1 < nk ? _mm512_loadu_si512(rows[k + 1] + j) : _mm512_setzero_si512();
        lo[i] = _mm512_unpacklo_epi16(a, b);
        hi[i] = _mm512_unpackhi_epi16(a, b);
      }
      Transpose16x16(lo);
      Transpose16x16(hi);
      uint32_t* t_lo = vt + ((j / 16) * kKeySteps + ks) * kTile;
      uint32_t* t_hi = vt + ((j / 16 + 1) * kKeySteps + ks) * kTile;
      for (int n = 0; n < 16; ++n) {
        _mm512_store_si512(t_lo + n * 16, lo[n]);
        _mm512_store_si512(t_hi + n * 16, hi[n]);
      }
    }
}

// The single-block form (decode): V rows as B tiles of O += P · V. Tile (ks, db) row i = keys
// 32 ks + 2i and + 2i + 1 interleaved per dim by the same unpacks (the same dim order), at
// vp + (ks · 16 + i) · d + 16 db, rows d apart. No transposes: with one row block, transposing V
// for every chunk cost more than transposing P.
// `between()` runs after each key pair (where the caller interleaves tile work).
template <typename Between>
void BuildValuePairs(const uint16_t* const rows[kChunk], size_t nk, size_t d, uint32_t* vp,
                     Between between) {
  const size_t n_ks = (nk + 31) / 32;
  for (size_t ks = 0; ks < n_ks; ++ks)
    for (size_t i = 0; i < 16; ++i, between()) {
      const size_t k = ks * 32 + 2 * i;
      uint32_t* out = vp + (ks * 16 + i) * d;
      for (size_t j = 0; j < d; j += 32) {
        const __m512i a = k < nk ? _mm512_loadu_si512(rows[k] + j) : _mm512_setzero_si512();
        const __m512i b = k + 1 < nk ? _mm512_loadu_si512(rows[k + 1] + j) : _mm512_setzero_si512();
        _mm512_store_si512(out + j, _mm512_unpacklo_epi16(a, b));
        _mm512_store_si512(out + j + 16, _mm512_unpackhi_epi16(a, b));
      }
    }
}

// One 32-dim step of an output row: lo / hi hold its dims in BuildValueTiles' order (lanes of 4
// floats: lo (0-3 8-11 16-19 24-27), hi (4-7 12-15 20-23 28-31)); written in order, times inv.
inline void StoreStepInOrder(__m512 lo, __m512 hi, __m512 inv, float* out) {
  const __m512 x = _mm512_shuffle_f32x4(lo, hi, _MM_SHUFFLE(1, 0, 1, 0));  // l0 l1 h0 h1
  const __m512 y = _mm512_shuffle_f32x4(lo, hi, _MM_SHUFFLE(3, 2, 3, 2));  // l2 l3 h2 h3
  _mm512_storeu_ps(out, _mm512_mul_ps(_mm512_shuffle_f32x4(x, x, _MM_SHUFFLE(3, 1, 2, 0)), inv));
  _mm512_storeu_ps(out + 16,
                   _mm512_mul_ps(_mm512_shuffle_f32x4(y, y, _MM_SHUFFLE(3, 1, 2, 0)), inv));
}

// One row of the single-block form's O (dims in BuildValuePairs' order) scaled by inv and written
// with the dims in order.
void StoreRow(const float* o, size_t d, float inv, float* out) {
  for (size_t j = 0; j < d; j += 32)
    StoreStepInOrder(_mm512_load_ps(o + j), _mm512_load_ps(o + j + 16), _mm512_set1_ps(inv),
                     out + j);
}

// One row block's output: O^T tiles [16 dims][16 rows] transposed back to rows, scaled by 1 / sum
// and written with the dims in order (the inverse of BuildValueTiles' order).
void StoreBlock(const AttentionTileArgs& a, const float* ot, const float* sum, size_t r0,
                size_t nr) {
  const size_t d = a.head_dim, group = a.group;
  for (size_t j = 0; j < d; j += 32) {
    __m512i lo[16], hi[16];
    for (int n = 0; n < 16; ++n) {
      lo[n] = _mm512_load_si512(ot + (j / 16) * kTile + n * 16);
      hi[n] = _mm512_load_si512(ot + (j / 16 + 1) * kTile + n * 16);
    }
    Transpose16x16(lo);
    Transpose16x16(hi);
    for (size_t r = 0; r < nr; ++r) {
      const size_t i = a.q0 + (r0 + r) / group, h = a.kv_head * group + (r0 + r) % group;
      StoreStepInOrder(_mm512_castsi512_ps(lo[r]), _mm512_castsi512_ps(hi[r]),
                       _mm512_set1_ps(1.0f / sum[r]), a.out + i * a.ldo + h * d + j);
    }
  }
}

// Work items the tiles take: whole 32-dim steps and the scratch's bound (as the AVX-512 tile).
// Decode over an FP8 cache too, now that its rows decode by the byte tables (RowDecoder):
// bench_attention decode fp8, 2 threads, 2 alternating rounds against the AVX-512 tile: 8 x 4096
// 13.0 / 10.3 ms against 16.1 / 16.1, 1 x 32768 11.3 / 14.1 against 16.0 / 17.4; one thread from
// L2 (--hot) 0.17-0.18 against 0.19-0.29 ms. (With the f32-route row decode it was slower: 8 x
// 4096 14.4-20.3 ms against 9.3-11.1.)
bool TilesFit(const AttentionTileArgs& a) {
  return a.head_dim % 32 == 0 && a.head_dim <= 256 && a.tile_scratch != nullptr;
}

// The tile unit and the vector units only work at once when their instructions are interleaved
// in program order: a run of TDPBF16PS issued whole holds the tile unit for hundreds of cycles
// while the vector work behind it waits for reorder-buffer entries. (Emerald Rapids, a scratch
// loop of 96 TDPBF16PS and ~1100 cycles of FMAs: 3300-4100 cycles one run after the other,
// 1500-2100 interleaved four products at a time, where the slower alone takes 1300-1800. Here,
// bench_attention prefill 512 bf16, 3 alternating rounds: 11.2 / 9.8 / 12.3 ms with runs, 8.5 /
// 10.2 / 8.1 interleaved.) So the products are cut into units that a caller issues one at a time
// between pieces of its vector work (Issue), or all at once (Finish).

// One 16-key block's S^T: C tile kKb += K block (A, tmm7) · Q^T parts (B, tmm4-6), one step.
template <int kKb>
inline void ScoreStep(const uint16_t* k_tile, size_t k_stride) {
  MOESERVE_TILE_LOAD(7, k_tile, k_stride);
  // Smallest part first: the two small products are summed before the large one.
  MOESERVE_TILE_DP_N(kKb, 7, 6);
  MOESERVE_TILE_DP_N(kKb, 7, 5);
  MOESERVE_TILE_DP_N(kKb, 7, 4);
}

// One chunk's keys [c0, c0 + nk): its V rows, and where the A tiles of its 16-key blocks of K
// start (k_stride elements between rows): in a bf16 cache whose blocks hold whole 16-key blocks,
// else in b.krow (rows copied, or decoded from FP8 with the keys' scales in b.kscale / b.vscale
// at slot · kChunk).
struct ChunkKeys {
  size_t c0 = 0, nk = 0, n_ks = 0, n_kb = 0, slot = 0;
  const uint16_t* vrows[kChunk] = {};
  const uint16_t* k_tiles[kKeyBlocks] = {};
  size_t k_stride = 0;
};

ChunkKeys GatherChunk(const AttentionTileArgs& a, const Buffers& b, size_t c0, size_t kv_end,
                      size_t slot) {
  const size_t d = a.head_dim, bs = a.block_size;
  const bool fp8 = a.k_blocks8 != nullptr;
  ChunkKeys c;
  c.c0 = c0;
  c.nk = kv_end - c0 < kChunk ? kv_end - c0 : kChunk;
  c.n_ks = (c.nk + 31) / 32;
  c.n_kb = (c.nk + 15) / 16;
  c.slot = slot;
  const uint16_t* krows[kChunk];
  // e4m3 codes -> exact bf16 (every e4m3 value is a normal bf16) by the byte tables: ~10 uops per
  // 64 codes, where the f32 route (E4m3ToF32Over256, shift, vpmovdw) took ~32.
  const RowDecoder dec;
  PositionCursor at(c0, bs);
  for (size_t k = 0; k < c.nk; ++k, at.Next(bs)) {
    const size_t row = at.row * a.num_kv_heads + a.kv_head;
    if (fp8) {
      const uint8_t* kb = a.k_blocks8[at.block];
      const uint8_t* vb = a.v_blocks8[at.block];
      dec.Row(kb + row * d, d, b.krow + k * d);
      dec.Row(vb + row * d, d, b.vrow + k * d);
      b.kscale[slot * kChunk + k] = reinterpret_cast<const float*>(kb + a.scale_offset)[row];
      b.vscale[slot * kChunk + k] = reinterpret_cast<const float*>(vb + a.scale_offset)[row];
      c.vrows[k] = b.vrow + k * d;
    } else {
      krows[k] = reinterpret_cast<const uint16_t*>(a.k_blocks[at.block] + row * d);
      c.vrows[k] = reinterpret_cast<const uint16_t*>(a.v_blocks[at.block] + row * d);
    }
  }
  if (!fp8 && bs % 16 == 0) {
    // Keys past nk in the last block are the cache's own rows (allocated; masked later).
    for (size_t kb = 0; kb < c.n_kb; ++kb) c.k_tiles[kb] = krows[kb * 16];
    c.k_stride = a.num_kv_heads * d;
    return c;
  }
  if (!fp8)
    for (size_t k = 0; k < c.nk; ++k) std::memcpy(b.krow + k * d, krows[k], d * 2);
  // Rows past nk within the last 16-key block: zero (they are masked, but stay finite).
  std::memset(b.krow + c.nk * d, 0, (c.n_kb * 16 - c.nk) * d * 2);
  for (size_t kb = 0; kb < c.n_kb; ++kb) c.k_tiles[kb] = b.krow + kb * 16 * d;
  c.k_stride = d;
  return c;
}

// S^T [64 keys][16 rows] of one chunk and row block (qt: the block's Q^T tiles), stored to s after
// the last unit. A unit is one (32-dim step, 16-key block): C tiles 0-3, q's parts tiles 4-6
// (loaded by a step's first unit), K tile 7.
class ScoreUnits {
 public:
  ScoreUnits() = default;  // nothing to issue
  ScoreUnits(const uint32_t* qt, const ChunkKeys& keys, size_t steps, float* s)
      : qt_(qt), k_stride_(keys.k_stride), n_kb_(keys.n_kb), total_(steps * keys.n_kb), s_(s) {
    for (size_t kb = 0; kb < kKeyBlocks; ++kb) k_tiles_[kb] = keys.k_tiles[kb];
  }

  void Issue() {
    if (next_ == total_) return;
    const size_t st = next_ / n_kb_, kb = next_ % n_kb_;
    if (next_ == 0) {
      MOESERVE_TILE_ZERO(0);
      MOESERVE_TILE_ZERO(1);
      MOESERVE_TILE_ZERO(2);
      MOESERVE_TILE_ZERO(3);
    }
    if (kb == 0) {
      const uint32_t* q = qt_ + st * kParts * kTile;
      MOESERVE_TILE_LOAD(4, q, 64);
      MOESERVE_TILE_LOAD(5, q + kTile, 64);
      MOESERVE_TILE_LOAD(6, q + 2 * kTile, 64);
    }
    const uint16_t* k = k_tiles_[kb] + st * 32;
    const size_t stride = k_stride_ * 2;
    switch (kb) {
      case 0:
        ScoreStep<0>(k, stride);
        break;
      case 1:
        ScoreStep<1>(k, stride);
        break;
      case 2:
        ScoreStep<2>(k, stride);
        break;
      default:
        ScoreStep<3>(k, stride);
    }
    if (++next_ < total_) return;
    MOESERVE_TILE_STORE(0, s_, 64);
    if (n_kb_ > 1) MOESERVE_TILE_STORE(1, s_ + 256, 64);
    if (n_kb_ > 2) MOESERVE_TILE_STORE(2, s_ + 512, 64);
    if (n_kb_ > 3) MOESERVE_TILE_STORE(3, s_ + 768, 64);
  }

  void Finish() {
    while (next_ < total_) Issue();
  }

 private:
  const uint32_t* qt_ = nullptr;
  const uint16_t* k_tiles_[kKeyBlocks] = {};
  size_t k_stride_ = 0, n_kb_ = 0, total_ = 0, next_ = 0;
  float* s_ = nullptr;
};

// C (tmm0) += the products of one 32-key step's three P parts (tmm kP, kP + 1, kP + 2: hi, mid,
// lo; the smallest first) with V's tile (tmm1). Row-major O: P is the A operand; O^T: V^T is.
template <bool kRowMajor, int kP>
inline void StepProducts() {
  MOESERVE_TILE_DP_N(0, kRowMajor ? kP + 2 : 1, kRowMajor ? 1 : kP + 2);
  MOESERVE_TILE_DP_N(0, kRowMajor ? kP + 1 : 1, kRowMajor ? 1 : kP + 1);
  MOESERVE_TILE_DP_N(0, kRowMajor ? kP : 1, kRowMajor ? 1 : kP);
}

// One row block's O += P · V over n_ks 32-key steps, a unit per 16 dims of O. pt: P's part tiles
// ([step][part], tmm2-7, loaded by the first unit); row-major (kRowMajor: A tiles of P, vt:
// BuildValuePairs' B tiles, o: [16][d]) or transposed (B tiles of P^T, vt: BuildValueTiles' A tiles
// of V^T, o: the block's O^T tiles). `first`: O starts at zero.
template <bool kRowMajor>
class PvUnits {
 public:
  PvUnits() = default;  // nothing to issue
  PvUnits(const uint32_t* pt, const uint32_t* vt, float* o, size_t d, size_t n_ks, bool first)
      : pt_(pt), vt_(vt), o_(o), d_(d), n_ks_(n_ks), first_(first) {}

  void Issue() {
    if (db_ == d_ / 16) return;
    if (db_ == 0) {
      MOESERVE_TILE_LOAD(2, pt_, 64);
      MOESERVE_TILE_LOAD(3, pt_ + kTile, 64);
      MOESERVE_TILE_LOAD(4, pt_ + 2 * kTile, 64);
      if (n_ks_ > 1) {
        MOESERVE_TILE_LOAD(5, pt_ + 3 * kTile, 64);
        MOESERVE_TILE_LOAD(6, pt_ + 4 * kTile, 64);
        MOESERVE_TILE_LOAD(7, pt_ + 5 * kTile, 64);
      }
    }
    const size_t o_stride = kRowMajor ? d_ * 4 : 64, v_stride = kRowMajor ? d_ * 4 : 64;
    float* c = kRowMajor ? o_ + db_ * 16 : o_ + db_ * kTile;
    const uint32_t* v = kRowMajor ? vt_ + db_ * 16 : vt_ + db_ * kKeySteps * kTile;
    const uint32_t* v1 = kRowMajor ? v + 16 * d_ : v + kTile;  // the second 32-key step
    if (first_) {
      MOESERVE_TILE_ZERO(0);
    } else {
      MOESERVE_TILE_LOAD(0, c, o_stride);
    }
    MOESERVE_TILE_LOAD(1, v, v_stride);
    StepProducts<kRowMajor, 2>();
    if (n_ks_ > 1) {
      MOESERVE_TILE_LOAD(1, v1, v_stride);
      StepProducts<kRowMajor, 5>();
    }
    MOESERVE_TILE_STORE(0, c, o_stride);
    ++db_;
  }

  void Finish() {
    while (db_ < d_ / 16) Issue();
  }
  bool Done() const { return db_ == d_ / 16; }

 private:
  const uint32_t* pt_ = nullptr;
  const uint32_t* vt_ = nullptr;
  float* o_ = nullptr;
  size_t d_ = 0, n_ks_ = 0, db_ = 0;
  bool first_ = false;
};

// Row block rb's running max moves from old_max to new_max (stored): returns the rows' factors
// e^(old − new) (1 where the max stayed or had no value yet) and rescales O's rows by them, from
// the item's second chunk on (before, O is unset).
inline __m512 UpdateMax(const AttentionTileArgs& a, const Buffers& b, size_t rb, size_t c0,
                        bool single, __m512 old_max, __m512 new_max) {
  const size_t d = a.head_dim;
  _mm512_store_ps(b.max + rb * 16, new_max);
  // Lanes whose max moved (and had one): O and the sum scaled by e^(old − new).
  const __mmask16 moved = _mm512_cmp_ps_mask(old_max, new_max, _CMP_LT_OQ) &
                          _mm512_cmp_ps_mask(old_max, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
  __m512 corr = _mm512_set1_ps(1.0f);
  if (!moved) return corr;
  corr = _mm512_mask_mov_ps(corr, moved, Exp(_mm512_sub_ps(old_max, new_max)));
  if (c0 > a.key0 && !single) {
    float* o = b.ot + rb * (d / 16) * kTile;
    for (size_t n = 0; n < d; ++n)
      _mm512_store_ps(o + n * 16, _mm512_mul_ps(_mm512_load_ps(o + n * 16), corr));
  } else if (c0 > a.key0) {
    alignas(64) float c[16];
    _mm512_store_ps(c, corr);
    for (size_t n = 0; n < 16; ++n)
      if (moved >> n & 1)
        for (size_t j = 0; j < d; j += 16)
          _mm512_store_ps(b.ot + n * d + j,
                          _mm512_mul_ps(_mm512_load_ps(b.ot + n * d + j), _mm512_set1_ps(c[n])));
  }
  return corr;
}

// P's B tiles of P^T transposed into A tiles (row n: its 16 key pairs), for the single-block form.
template <typename Between>
void TransposePTiles(const Buffers& b, size_t n_ks, Between& between) {
  for (size_t t = 0; t < n_ks * kParts; ++t, between()) {
    __m512i r[16];
    uint32_t* tile = b.pt + t * kTile;
    for (int i = 0; i < 16; ++i) r[i] = _mm512_load_si512(tile + i * 16);
    Transpose16x16(r);
    for (int n = 0; n < 16; ++n) _mm512_store_si512(tile + n * 16, r[n]);
  }
}

// Row block rb's scores of one chunk (x: S^T [nk][16] as the tile unit stored it) through the
// online softmax: scaled and masked in place, the rows' max and sum updated, O rescaled where a
// row's max moved (from the second chunk of the item: before, O is unset), and P's parts written
// as B tiles of P^T (b.pt), transposed into A tiles of P for the single-block form. `between()`
// runs after each key pair's P and each transpose (where the caller interleaves tile work).
template <typename Between>
void SoftmaxChunk(const AttentionTileArgs& a, const Buffers& b, size_t rb, const ChunkKeys& keys,
                  bool single, float* x, Between between) {
  const size_t c0 = keys.c0, nk = keys.nk, n_ks = keys.n_ks;
  const bool fp8 = a.k_blocks8 != nullptr;
  const float* kscale = b.kscale + keys.slot * kChunk;
  const float* vscale = b.vscale + keys.slot * kChunk;
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  const __m512i pos = _mm512_load_si512(b.pos + rb * 16);
  const __m512 old_max = _mm512_load_ps(b.max + rb * 16);
  // Scores scaled and masked in place (keys past a row's position or past nk: −inf).
  __m512 mx = ninf;
  for (size_t k = 0; k < nk; ++k) {
    const __mmask16 visible =
        _mm512_cmpge_epi32_mask(pos, _mm512_set1_epi32(static_cast<int>(c0 + k)));
    const float f = fp8 ? a.scale * kscale[k] : a.scale;
    const __m512 v =
        _mm512_mask_mul_ps(ninf, visible, _mm512_load_ps(x + k * 16), _mm512_set1_ps(f));
    _mm512_store_ps(x + k * 16, v);
    mx = _mm512_max_ps(mx, v);
  }
  const __m512 new_max = _mm512_max_ps(old_max, mx);
  const __m512 corr = UpdateMax(a, b, rb, c0, single, old_max, new_max);
  // P = e^(s − max) (zero where masked, and on lanes that have no key yet), summed, split into
  // P^T's B tiles a key pair at a time.
  const __mmask16 live = _mm512_cmp_ps_mask(new_max, ninf, _CMP_NEQ_OQ);
  __m512 psum = _mm512_setzero_ps();
  for (size_t k = 0; k < n_ks * 32; k += 2, between()) {
    __m512 p[2];
    for (size_t e = 0; e < 2; ++e) {
      if (k + e >= nk) {
        p[e] = _mm512_setzero_ps();
        continue;
      }
      p[e] =
          _mm512_maskz_mov_ps(live, Exp(_mm512_sub_ps(_mm512_load_ps(x + (k + e) * 16), new_max)));
      psum = _mm512_add_ps(psum, p[e]);
      if (fp8) p[e] = _mm512_mul_ps(p[e], _mm512_set1_ps(vscale[k + e]));
    }
    __m512i part[kParts];
    SplitPair(p[0], p[1], part);
    uint32_t* t = b.pt + (k / 32) * kParts * kTile + (k % 32) / 2 * 16;
    for (size_t q = 0; q < kParts; ++q) _mm512_store_si512(t + q * kTile, part[q]);
  }
  const __m512 sum = _mm512_load_ps(b.sum + rb * 16);
  _mm512_store_ps(b.sum + rb * 16, _mm512_fmadd_ps(sum, corr, psum));
  if (single) TransposePTiles(b, n_ks, between);
}

// SoftmaxChunk for a single row block of at most 8 rows (decode: a query's group of q heads;
// MiniMax-M2's is 6): two keys per vector, key k's rows in lanes 0-7 and key k + 1's in lanes
// 8-15, where the 16-lane form leaves 8 or more lanes of every vector empty; so half the scaling,
// exps and splits. The same operations per score; a row's sum adds its even and odd keys apart
// and then the two (the 16-lane form adds them in key order). P's key pairs come out as
// SplitPair's B tile rows with rows 8-15 zero. Pass 1 of an odd nk reads the slot past the last
// key (inside the chunk's 64 slots; its lanes are masked).
template <typename Between>
void SoftmaxChunkPaired(const AttentionTileArgs& a, const Buffers& b, const ChunkKeys& keys,
                        float* x, Between between) {
  const size_t c0 = keys.c0, nk = keys.nk, n_ks = keys.n_ks;
  const bool fp8 = a.k_blocks8 != nullptr;
  const float* kscale = b.kscale + keys.slot * kChunk;
  const float* vscale = b.vscale + keys.slot * kChunk;
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  const __m512i low8 = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
  const __m512i pair = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
  constexpr __mmask16 kLow = 0x00ff;
  // Row positions, and each lane's key offset within a pair (0 in lanes 0-7, 1 in 8-15).
  const __m512i pos = _mm512_permutexvar_epi32(low8, _mm512_load_si512(b.pos));
  const __m512i half = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const __m512 old_max = _mm512_load_ps(b.max);
  // Per-key values of keys k (lanes 0-7) and k + 1 (lanes 8-15; key k's again past nk) times f.
  const auto pair_of = [&](const float* per_key, size_t k, float f) {
    return _mm512_mask_blend_ps(kLow, _mm512_set1_ps(f * per_key[k + (k + 1 < nk)]),
                                _mm512_set1_ps(f * per_key[k]));
  };
  // Scores of keys k, k + 1 scaled and masked into vector k / 2 (in place: slot k / 2 is written
  // after slots k and k + 1 are read).
  __m512 mx2 = ninf;
  for (size_t k = 0; k < nk; k += 2) {
    const __m512i key = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(c0 + k)), half);
    __mmask16 visible = _mm512_cmpge_epi32_mask(pos, key);
    if (k + 1 >= nk) visible &= kLow;
    const __m512 f = fp8 ? pair_of(kscale, k, a.scale) : _mm512_set1_ps(a.scale);
    const __m512 z =
        _mm512_permutex2var_ps(_mm512_load_ps(x + k * 16), pair, _mm512_load_ps(x + (k + 1) * 16));
    const __m512 v = _mm512_mask_mul_ps(ninf, visible, z, f);
    _mm512_store_ps(x + k / 2 * 16, v);
    mx2 = _mm512_max_ps(mx2, v);
  }
  // Per row: the max of its two halves (lanes 8-15 of the result: rows past 8, none).
  const __m512 mx =
      _mm512_mask_mov_ps(ninf, kLow, _mm512_max_ps(mx2, _mm512_shuffle_f32x4(mx2, mx2, 0x4e)));
  const __m512 new_max = _mm512_max_ps(old_max, mx);
  const __m512 corr = UpdateMax(a, b, 0, c0, true, old_max, new_max);
  const __mmask16 live = _mm512_cmp_ps_mask(new_max, ninf, _CMP_NEQ_OQ);
  const __m512 max2 = _mm512_permutexvar_ps(low8, new_max);
  const __mmask16 live2 = static_cast<__mmask16>((live & kLow) | (live & kLow) << 8);
  __m512 psum2 = _mm512_setzero_ps();
  for (size_t k = 0; k < n_ks * 32; k += 2, between()) {
    __m512 p = _mm512_setzero_ps();
    if (k < nk) {
      p = _mm512_maskz_mov_ps(live2, Exp(_mm512_sub_ps(_mm512_load_ps(x + k / 2 * 16), max2)));
      psum2 = _mm512_add_ps(psum2, p);
      if (fp8) p = _mm512_mul_ps(p, pair_of(vscale, k, 1.0f));
    }
    // Dword n < 8 of each part: (key k's row n, key k + 1's row n); rows 8-15 zero.
    __m512i part[kParts];
    SplitPair(_mm512_maskz_mov_ps(kLow, p),
              _mm512_maskz_mov_ps(kLow, _mm512_shuffle_f32x4(p, p, 0x4e)), part);
    uint32_t* t = b.pt + (k / 32) * kParts * kTile + (k % 32) / 2 * 16;
    for (size_t q = 0; q < kParts; ++q) _mm512_store_si512(t + q * kTile, part[q]);
  }
  const __m512 psum = _mm512_maskz_add_ps(kLow, psum2, _mm512_shuffle_f32x4(psum2, psum2, 0x4e));
  _mm512_store_ps(b.sum, _mm512_fmadd_ps(_mm512_load_ps(b.sum), corr, psum));
  TransposePTiles(b, n_ks, between);
}

// Calls `fn` on every kEvery-th call: how often a vector loop issues a unit of tile work. (A
// compile-time count: a count held in the object compiled to an integer division per call.)
template <size_t kEvery, typename Fn>
struct Every {
  const Fn& fn;
  size_t calls = 0;
  void operator()() {
    if (++calls % kEvery == 0) fn();
  }
};

// Several row blocks (prefill): per chunk, V^T's A tiles once, then each row block's softmax
// between the P·V units of the block before it and the score units of the block after it. The
// first P·V unit loads all of P's tiles, so it is issued before the softmax rewrites b.pt.
void PrefillChunks(const AttentionTileArgs& a, const Buffers& b, size_t kv_end, size_t blocks) {
  const size_t d = a.head_dim, steps = d / 32, dbs = d / 16, group = a.group;
  const size_t stride = kChunk * 16;  // floats per S^T buffer
  for (size_t c0 = a.key0; c0 < kv_end; c0 += kChunk) {
    const size_t pf0 = c0 + kPrefetchChunks * kChunk;
    if (pf0 < kv_end)
      PrefetchKvRows(a, a.kv_head, pf0, pf0 + kChunk < kv_end ? pf0 + kChunk : kv_end);
    const ChunkKeys keys = GatherChunk(a, b, c0, kv_end, 0);
    BuildValueTiles(keys.vrows, keys.nk, d, b.vt);
    // Rows are ordered by query: those that see a key of this chunk are a suffix.
    const size_t i_first = c0 > a.first_pos + a.q0 ? c0 - a.first_pos : a.q0;
    const size_t rb_first = (i_first - a.q0) * group / 16;
    auto scores = [&](size_t rb) {
      return ScoreUnits(b.qt + rb * steps * kParts * kTile, keys, steps, b.st + (rb % 2) * stride);
    };
    auto products = [&](size_t rb) {
      return PvUnits<false>(b.pt, b.vt, b.ot + rb * dbs * kTile, d, keys.n_ks, c0 == a.key0);
    };
    scores(rb_first).Finish();
    PvUnits<false> before;  // nothing before the first block
    for (size_t rb = rb_first; rb < blocks; ++rb) {
      ScoreUnits after;
      if (rb + 1 < blocks) after = scores(rb + 1);
      before.Issue();
      const auto issue = [&] {
        if (!before.Done())
          before.Issue();
        else
          after.Issue();
      };
      SoftmaxChunk(a, b, rb, keys, false, b.st + (rb % 2) * stride, issue);
      before.Finish();
      after.Finish();
      before = products(rb);
    }
    before.Finish();
  }
}

// One row block (decode: a query's q heads): chunk c's softmax runs between the score units of
// chunk c + 1, and its P·V units between the building of chunk c + 1's V pairs, so the tile unit
// and the vector units work at once. S^T, V's pairs and FP8 scales in two slots (chunk parity).
void DecodeChunks(const AttentionTileArgs& a, const Buffers& b, size_t kv_end) {
  const size_t d = a.head_dim, steps = d / 32;
  // At most 8 rows: two keys per vector in the softmax (SoftmaxChunkPaired). One thread, K+V in
  // L2 (bench_attention --hot, 3 alternating rounds): bf16 12.9 / 6.5 / 12.9 -> 14.7 / 15.1 /
  // 15.1 GB/s, FP8 5.1 / 4.0 / 5.3 -> 5.7 / 5.6 / 5.8.
  const bool paired = (a.q1 - a.q0) * a.group <= 8;
  const size_t stride = kChunk * 16, vt_words = (d / 16) * kKeySteps * kTile;
  const auto no_tiles = [] {};
  const size_t pf1 = a.key0 + kChunk;  // the loop requests from chunk 2 on
  if (pf1 < kv_end)
    PrefetchKvRows(a, a.kv_head, pf1, pf1 + kChunk < kv_end ? pf1 + kChunk : kv_end);
  ChunkKeys cur = GatherChunk(a, b, a.key0, kv_end, 0);
  BuildValuePairs(cur.vrows, cur.nk, d, b.vt, no_tiles);
  ScoreUnits(b.qt, cur, steps, b.st).Finish();
  for (;;) {
    const size_t c1 = cur.c0 + kChunk, slot = cur.slot, next_slot = 1 - slot;
    const size_t pf0 = cur.c0 + (kPrefetchChunks + 1) * kChunk;
    if (pf0 < kv_end)
      PrefetchKvRows(a, a.kv_head, pf0, pf0 + kChunk < kv_end ? pf0 + kChunk : kv_end);
    const bool more = c1 < kv_end;
    ChunkKeys next;
    ScoreUnits next_scores;
    if (more) {
      next = GatherChunk(a, b, c1, kv_end, next_slot);
      next_scores = ScoreUnits(b.qt, next, steps, b.st + next_slot * stride);
    }
    const auto issue_score = [&] { next_scores.Issue(); };
    if (paired)
      SoftmaxChunkPaired(a, b, cur, b.st + slot * stride,
                         Every<2, decltype(issue_score)>{issue_score});
    else
      SoftmaxChunk(a, b, 0, cur, true, b.st + slot * stride,
                   Every<2, decltype(issue_score)>{issue_score});
    next_scores.Finish();
    PvUnits<true> pv(b.pt, b.vt + slot * vt_words, b.ot, d, cur.n_ks, cur.c0 == a.key0);
    if (more) {
      const auto issue_pv = [&] { pv.Issue(); };
      BuildValuePairs(next.vrows, next.nk, d, b.vt + next_slot * vt_words,
                      Every<4, decltype(issue_pv)>{issue_pv});
    }
    pv.Finish();
    if (!more) return;
    cur = next;
  }
}

}  // namespace

void AttentionTile(const AttentionTileArgs& a) {
  if (!TilesFit(a)) return avx512::AttentionTile(a);
  if (a.kv_heads > 1) return EachKvHead(a, AttentionTile);
  const size_t d = a.head_dim, group = a.group, steps = d / 32;
  const size_t rows = (a.q1 - a.q0) * group, blocks = (rows + 15) / 16, rp = blocks * 16;
  const size_t kv_end = a.first_pos + a.q1 < a.key1 ? a.first_pos + a.q1 : a.key1;
  // One row block (decode: the group's q heads of one query): O row-major, P transposed into A
  // tiles (3 transposes per 32 keys) instead of V into A tiles of V^T (d / 16 per 32 keys, shared
  // by all row blocks: the cheaper of the two from two blocks on).
  const bool single = blocks == 1;
  Buffers b(*a.tile_scratch, rp, d);

  // q's parts, row-major, then transposed into B tiles: tile (rb, step, part) row i, lane n =
  // dims 2i, 2i + 1 of the step in row n's part.
  for (size_t r = 0; r < rp; ++r) {
    if (r >= rows) {
      for (size_t p = 0; p < kParts; ++p) std::memset(b.qa + (p * rp + r) * d, 0, d * 2);
      b.pos[r] = -1;
      b.max[r] = -INFINITY;
      b.sum[r] = 1.0f;
      continue;
    }
    const size_t i = a.q0 + r / group, h = a.kv_head * group + r % group;
    const float* q = a.q + i * a.ldq + h * d;
    for (size_t j = 0; j < d; j += 32) {
      __m512i part[kParts];
      Split32(_mm512_loadu_ps(q + j), _mm512_loadu_ps(q + j + 16), part);
      for (size_t p = 0; p < kParts; ++p) _mm512_store_si512(b.qa + (p * rp + r) * d + j, part[p]);
    }
    b.pos[r] = static_cast<int32_t>(a.first_pos + i);
    b.max[r] = -INFINITY;
    b.sum[r] = 0.0f;
  }
  for (size_t rb = 0; rb < blocks; ++rb)
    for (size_t st = 0; st < steps; ++st)
      for (size_t p = 0; p < kParts; ++p) {
        __m512i t[16];
        for (size_t n = 0; n < 16; ++n)
          t[n] = _mm512_load_si512(b.qa + (p * rp + rb * 16 + n) * d + st * 32);
        Transpose16x16(t);
        uint32_t* tile = b.qt + ((rb * steps + st) * kParts + p) * kTile;
        for (int i = 0; i < 16; ++i) _mm512_store_si512(tile + i * 16, t[i]);
      }

  ConfigureTiles();
  if (single)
    DecodeChunks(a, b, kv_end);
  else
    PrefillChunks(a, b, kv_end, blocks);
  _tile_release();

  if (a.part_max)
    for (size_t r = 0; r < rows; ++r) a.part_max[r] = b.max[r], a.part_sum[r] = b.sum[r];
  if (single) {
    for (size_t r = 0; r < rows; ++r) {
      const size_t i = a.q0 + r / group, h = a.kv_head * group + r % group;
      StoreRow(b.ot + r * d, d, 1.0f / b.sum[r], a.out + i * a.ldo + h * d);
    }
    return;
  }
  for (size_t rb = 0; rb < blocks; ++rb)
    StoreBlock(a, b.ot + rb * (d / 16) * kTile, b.sum + rb * 16, rb * 16,
               rows - rb * 16 < 16 ? rows - rb * 16 : 16);
}

}  // namespace moeserve::kernels::amx
