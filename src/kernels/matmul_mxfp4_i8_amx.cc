// AMX-INT8 kernel of mxfp4_i8.h: the MXFP4 × Q8 matmul's exact block dot products on the tile
// unit (TDPBSSD), scaled into f32 on the vector units. Bit-identical to MatMulMxfp4I8Reference,
// as the AVX2 and VNNI kernels are: each 32-column block's integer dot is exact wherever it is
// summed, and the f32 steps are the reference's own, per token and row, in block order.
//
// Why: on the AMX cores the VNNI kernel spends ~17 vector instructions per token, 16 rows and 32
// columns (8 vpdpbusd, broadcasts, the scale) and an MXFP4 prefill's experts were bound by them
// (~68% of the vpdpbusd peak, two thirds of the prefill). One TDPBSSD does 16 tokens × 16 rows ×
// 32 columns; what stays on the vector units is the block's scale: per token and 16 rows a
// convert, a multiply and a multiply-add. Measured (one thread, hot [1536, 3072]): 1.3-1.7x the
// VNNI kernel from 32 tokens (isa_kernels.cc has the figures and why 32). What bounds
// it: the tile unit's loads, product and C store per block and the vector scaling run one after
// the other rather than side by side (a scratch loop of the pass, hot: 26-31 TSC cycles per block
// for the tile half, 15-18 for the vector half, 41-44 together, in any interleaving). The reason
// (another scratch loop): while TDPBSSD / TDPBF16PS multiply, the core's vector loads run at about
// half rate, and the scaling loads 33 times per product (16 C rows, 16 token-scale broadcasts);
// FMAs on registers alone run beside the products at full rate. Storing a block's C a step
// before scaling it did not change that, nor did reading C rows stored a block earlier, and
// storing four blocks' C before issuing the next four and then scaling them measured slower. The
// rows' scales are converted to f32 once per group pair, beside its B tiles (1.05-1.15x over
// converting them in every token pass).
//
// Tiles (K = 32: one scale block per product, so that each block's sums can be scaled apart):
//   A = 16 tokens × 32 int8 activations, the Q8 rows packed once per call as [tile][block]
//       A tiles (16 rows ldq apart cost a half line each);
//   B = 8 K-quads × 16 weight rows × 4 int8 (2·e2m1, signed: TDPBSSD multiplies signed by
//       signed, so no offset): row 2c of block b is the low nibbles of the repacked chunk c of
//       group g (8 rows × 4 columns, 32 bytes) and of group g + 1, row 2c + 1 their high nibbles
//       (mxfp4_i8.h's layout is already this, one vpshufb per half away);
//   C = 16 tokens × 16 rows of int32 block sums, stored and scaled into f32 accumulators
//       (acc[t] = fmaf(float(S), dw · h[t], acc[t]), dw the 16 rows' 2^(e − 127), h = 0.5·d).
// Four C tiles in flight (blocks b .. b + 3 issued before b is scaled).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/amx_tiles.h"
#include "kernels/e8m0_avx512.h"
#include "kernels/internal.h"
#include "kernels/mxfp4_i8.h"
#include "kernels/scratch.h"

namespace moeserve::kernels::amx {
namespace {

constexpr size_t kBlock = kMxfp4I8Block;
constexpr size_t kGroupRows = kMxfp4I8GroupRows;
constexpr size_t kBlockCodeBytes = 128;
constexpr size_t kTokens = 16;                    // tokens per A tile and per pass
constexpr size_t kATileBytes = kTokens * kBlock;  // 16 tokens × 32 activations
constexpr size_t kBTileBytes = kBlock / 4 * 64;   // 8 K-quads × 64 bytes
// A block in the decoded cache: its B tile, then its 16 rows' scales as f32.
constexpr size_t kBBlockBytes = kBTileBytes + 64;
// In flight: 4 C tiles (tmm0-3, blocks b .. b + 3), their A and B tiles alternating (tmm4 / 5
// and tmm6 / 7).
constexpr int kInFlight = 4;
constexpr int ATile(int c) {
  return 4 + c % 2;
}
constexpr int BTile(int c) {
  return 6 + c % 2;
}

// Palette 1 with this kernel's shapes: C 16 × 64 bytes, A 16 × 32, B 8 × 64.
void ConfigureInt8Tiles() {
  TileConfig config;
  for (int t = 0; t < kInFlight; ++t) config.colsb[t] = 64, config.rows[t] = 16;
  for (int t : {4, 5}) config.colsb[t] = 32, config.rows[t] = 16;
  for (int t : {6, 7}) config.colsb[t] = 64, config.rows[t] = kBlock / 4;
  LoadTileConfig(config);
}

// The 16 rows' scales of block b (group g's 8, then g + 1's; zeros past a lone group).
inline __m512 RowScales(const WeightMatrix& w, size_t g, bool second, size_t b) {
  const auto* s = static_cast<const uint8_t*>(w.scales) + g * w.scale_stride + b * kGroupRows;
  const __m128i lo = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s));
  return E8m0ToF32x16(
      second ? _mm_unpacklo_epi64(
                   lo, _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + w.scale_stride)))
             : lo);
}

// B tiles of every block of rows 16p .. 16p + 15 (groups g = 2p and g + 1; `second` false: a lone
// last group, the high halves zero) and their rows' scales, block b at out + b · kBBlockBytes.
void DecodeBTiles(const WeightMatrix& w, size_t g, bool second, size_t blocks, int8_t* out) {
  const __m512i lut = _mm512_broadcast_i32x4(
      _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12));
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const auto* codes = static_cast<const uint8_t*>(w.data) + g * w.row_stride;
  for (size_t b = 0; b < blocks; ++b) {
    for (int c = 0; c < 4; ++c) {
      const uint8_t* p = codes + b * kBlockCodeBytes + 32 * c;
      const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
      const __m512i v =
          second ? _mm512_inserti64x4(
                       _mm512_castsi256_si512(lo),
                       _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + w.row_stride)), 1)
                 : _mm512_zextsi256_si512(lo);
      int8_t* row = out + b * kBBlockBytes + 2 * c * 64;
      _mm512_store_si512(row, _mm512_shuffle_epi8(lut, _mm512_and_si512(v, nibble)));
      _mm512_store_si512(
          row + 64, _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble)));
    }
    _mm512_store_ps(out + b * kBBlockBytes + kBTileBytes, RowScales(w, g, second, b));
  }
}

// Block b's product into C tile kC: A from the token tile's activations, B from its decoded tile.
template <int kC>
[[gnu::always_inline]] inline void Issue(const int8_t* a, const int8_t* bt) {
  constexpr int kA = ATile(kC), kB = BTile(kC);
  MOESERVE_TILE_ZERO_N(kC);
  MOESERVE_TILE_LOAD_N(kA, a, kBlock);
  MOESERVE_TILE_LOAD_N(kB, bt, 64);
  MOESERVE_TILE_DPBSSD_N(kC, kA, kB);
}

// A token tile's 16 f32 accumulators (one per token, 16 rows each) as named members, not an
// array: GCC keeps an array of vectors indexed in an unrolled loop in memory (its scalar
// replacement runs before the unrolling), and with the tile instructions' "memory" clobbers in
// between, every FMA of Drain then loaded and stored its accumulator on the stack (144 such
// instructions in TokenPass). Each(acc, f) calls f(accumulator, token) for the 16 tokens.
struct TokenAccumulators {
  __m512 t0, t1, t2, t3, t4, t5, t6, t7, t8, t9, t10, t11, t12, t13, t14, t15;
};
static_assert(kTokens == 16);

template <typename Fn>
[[gnu::always_inline]] inline void Each(TokenAccumulators& a, Fn&& fn) {
  fn(a.t0, 0), fn(a.t1, 1), fn(a.t2, 2), fn(a.t3, 3), fn(a.t4, 4), fn(a.t5, 5), fn(a.t6, 6);
  fn(a.t7, 7), fn(a.t8, 8), fn(a.t9, 9), fn(a.t10, 10), fn(a.t11, 11), fn(a.t12, 12);
  fn(a.t13, 13), fn(a.t14, 14), fn(a.t15, 15);
}

// C tile kC (block b's sums) scaled into acc: acc[t] = fmaf(float(S[t]), dw · h[t], acc[t]).
template <int kC>
[[gnu::always_inline]] inline void Drain(const __m512 dw, const float* h, int32_t* buf,
                                         TokenAccumulators& acc) {
  MOESERVE_TILE_STORE_N(kC, buf, 64);
  Each(acc, [&](__m512& a, size_t t) {
    const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(h[t]));
    a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(buf + t * 16)), scale, a);
  });
}

// A token pass's inputs (a: its A tiles, [blocks][16 tokens][32]; h: [blocks][16] of 0.5·d; bt:
// the 16 rows' decoded blocks) and C's staging buffers. The accumulators stay outside it: passed
// by reference to always-inline steps they remain registers (TokenAccumulators).
struct TokenPassInputs {
  const int8_t* a;
  const float* h;
  const int8_t* bt;
  size_t blocks;
  int32_t* buf;  // [kInFlight][16 tokens × 16]

  template <int kC>
  [[gnu::always_inline]] void Issue(size_t b) const {
    if (b < blocks) amx::Issue<kC>(a + b * kATileBytes, bt + b * kBBlockBytes);
  }
  template <int kC>
  [[gnu::always_inline]] void Drain(size_t b, TokenAccumulators& acc) const {
    if (b < blocks)
      amx::Drain<kC>(_mm512_load_ps(bt + b * kBBlockBytes + kBTileBytes), h + b * kTokens,
                     buf + kC * kTokens * 16, acc);
  }
};

// One token tile against the 16 rows of bt's decoded blocks (tiles and scales), stored into y
// (tokens × rows).
void TokenPass(const int8_t* a, const float* h, const int8_t* bt, size_t blocks, float* y,
               size_t ldy, size_t tokens, size_t rows, bool accumulate) {
  alignas(64) int32_t buf[kInFlight * kTokens * 16];
  const TokenPassInputs in{a, h, bt, blocks, buf};
  TokenAccumulators acc;
  Each(acc, [](__m512& v, size_t) { v = _mm512_setzero_ps(); });
  in.Issue<0>(0);
  in.Issue<1>(1);
  in.Issue<2>(2);
  in.Issue<3>(3);
  for (size_t b = 0; b < blocks; b += kInFlight) {
    in.Drain<0>(b, acc);
    in.Issue<0>(b + 4);
    in.Drain<1>(b + 1, acc);
    in.Issue<1>(b + 5);
    in.Drain<2>(b + 2, acc);
    in.Issue<2>(b + 6);
    in.Drain<3>(b + 3, acc);
    in.Issue<3>(b + 7);
  }
  const __mmask16 mask = rows >= 16 ? __mmask16(0xffff) : __mmask16((1u << rows) - 1);
  Each(acc, [&](__m512 v, size_t t) {
    if (t >= tokens) return;
    if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, y + t * ldy));
    _mm512_mask_storeu_ps(y + t * ldy, mask, v);
  });
}

}  // namespace

void MatMulMxfp4I8(const Q8Rows& x, const WeightMatrix& w, float* y, size_t ldy, bool accumulate,
                   WorkerScratch& s) {
  const size_t blocks = x.k / kBlock, groups = (w.rows + kGroupRows - 1) / kGroupRows;
  const size_t tiles = (x.m + kTokens - 1) / kTokens;
  if (x.m == 0 || w.rows == 0) return;
  // h = 0.5·d per token tile and block, [tile][block][16 tokens] (tokens past m: 0), so that a
  // pass broadcasts each from memory.
  float* h = s.fp8_scales.As<float>(tiles * blocks * kTokens);
  for (size_t t = 0; t < tiles * kTokens; ++t)
    for (size_t b = 0; b < blocks; ++b)
      h[(t / kTokens * blocks + b) * kTokens + t % kTokens] =
          t < x.m ? 0.5f * x.d[t * x.ldd + b] : 0.0f;
  // The activations as A tiles, [tile][block][16 tokens][32] (tokens past m zero): a tile load
  // reads 8 whole lines instead of half a line from each of 16 rows ldq apart (the kernel at 512
  // tokens: 1.30 -> 1.50x the VNNI kernel's rate).
  int8_t* xa = s.xpack.As<int8_t>(tiles * blocks * kATileBytes);
  for (size_t t = 0; t < tiles * kTokens; ++t)
    for (size_t b = 0; b < blocks; ++b) {
      int8_t* dst = xa + ((t / kTokens * blocks + b) * kTokens + t % kTokens) * kBlock;
      if (t < x.m)
        std::memcpy(dst, x.q + t * x.ldq + b * kBlock, kBlock);
      else
        std::memset(dst, 0, kBlock);
    }
  int8_t* bt = s.pack.As<int8_t>(blocks * kBBlockBytes);
  ConfigureInt8Tiles();
  for (size_t g = 0; g < groups; g += 2) {
    const bool second = g + 1 < groups;
    const size_t left = w.rows - g * kGroupRows, rows = left < 16 ? left : 16;
    DecodeBTiles(w, g, second, blocks, bt);
    for (size_t tile = 0; tile < tiles; ++tile) {
      const size_t tokens = x.m - tile * kTokens < kTokens ? x.m - tile * kTokens : kTokens;
      TokenPass(xa + tile * blocks * kATileBytes, h + tile * blocks * kTokens, bt, blocks,
                y + tile * kTokens * ldy + g * kGroupRows, ldy, tokens, rows, accumulate);
    }
  }
  _tile_release();
}

}  // namespace moeserve::kernels::amx
