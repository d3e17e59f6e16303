// Per-ISA kernel entry points (not part of the public API; tests use them to run every path).
//
// The ISA translation units (*_avx2.cc, *_avx512bf16.cc) are compiled with their own -m flags and
// contain only pointer arithmetic and intrinsics: no std containers, no std::function, nothing
// whose inline definition the linker could pick from the wrong TU (an ODR trap with per-TU flags).
// Threading, scratch memory and dispatch live in the baseline-compiled files.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/mxfp4_i8.h"

namespace moeserve::kernels {

class ScratchBuffer;
struct WorkerScratch;

// Row-major "y[t, r] (=|+=) Σ_k x[t, k] · w[r, k]" over t < m, r < rows, k < k. y points at column
// 0 of the row range, w at its first row.

// One attention work item (attention.cc): queries [q0, q1) of a sequence (local indices, q and
// out already offset to the sequence's first row), all q heads of kv heads [kv_head, kv_head +
// kv_heads) (decode items take all of a sequence's; see attention.cc).
struct AttentionTileArgs {
  const float* q;
  size_t ldq;
  float* out;
  size_t ldo;
  const bf16* const* k_blocks;  // bf16 cache, or null for an FP8 cache:
  const bf16* const* v_blocks;
  const uint8_t* const* k_blocks8;  // FP8 cache blocks (quant.h layout), else null
  const uint8_t* const* v_blocks8;
  size_t scale_offset;  // FP8: byte offset of a block's f32 scales [block_size, num_kv_heads]
  size_t first_pos;     // position of local query 0 (kv_len − q_len)
  size_t q0, q1, kv_head, group, num_kv_heads, head_dim, block_size;
  float scale;
  // Scratch: k, v [block_size, head_dim]; scores [rows, block_size]; acc [rows, head_dim];
  // max, sum [rows]; rows = (q1 − q0) · group · kv_heads, kv head by kv head.
  float *k, *v, *scores, *acc, *max, *sum;
  // The calling thread's scratch for tiles that need more (the vector tiles' key chunks, the AMX
  // tile's operands), or null (then the generic tile runs).
  ScratchBuffer* tile_scratch = nullptr;
  // A split-KV item (attention.cc) sees only keys [key0, key1) of the sequence (key1 is capped at
  // each row's causal end; key0 is a multiple of 64 and at most the position of query q0, so
  // every row sees at least one key), and also stores each row's running max and sum at
  // part_max[r] and part_sum[r] (rows r as the scratch's: kv head, query − q0, q head), from which
  // the partial outputs of an item's splits are combined. Defaults: all keys, nothing stored.
  size_t key0 = 0, key1 = SIZE_MAX;
  float* part_max = nullptr;
  float* part_sum = nullptr;
  size_t kv_heads = 1;
};

// Runs a one-kv-head tile on each kv head of an item in turn (for the tiles that walk one:
// the generic and AMX ones), with each head's rows of the scratch and of part_max / part_sum.
void EachKvHead(const AttentionTileArgs& args, void (*tile)(const AttentionTileArgs&));

// A row range of a quantized weight as the ISA kernels see it (matmul.cc fills it from a
// WeightMatrix view and the range's first row). Row r of the range:
//   kFp8Block: codes + r·row_stride (1 byte / element); its scales are the f32 row
//              scales + ((row0 + r) / 128)·scale_stride, column c uses entry (col0 + c) / 128.
//   kMxfp4:    codes + r·row_stride (2 elements / byte, element 2i low nibble); e8m0 scales at
//              scales + r·scale_stride, one per 32 columns; k % 32 == 0.
struct QuantRows {
  const uint8_t* codes;
  size_t row_stride;
  const void* scales;
  size_t scale_stride;
  size_t row0, col0;  // kFp8Block only: global row of range row 0, global column of column 0
  size_t rows, k;
};

namespace avx2 {
void AttentionTile(const AttentionTileArgs& args);
// Row r of a quantized range, dequantized exactly (as DequantizeRow) into out[0, k).
void DecodeFp8Row(const QuantRows& w, size_t r, float* out);
void DecodeMxfp4Row(const QuantRows& w, size_t r, float* out);
// x rows [m, k] (stride ldxr) packed for the GEMMs: tiles of kPackedXTile tokens, each
// [k][kPackedXTile] floats, tokens past m zero. xp: PackedXFloats(m, k) floats.
inline constexpr size_t kPackedXTile = 6;
size_t PackedXFloats(size_t m, size_t k);
void PackX(const float* xr, size_t ldxr, size_t m, size_t k, float* xp);
// One token's column of a tile (slot = the tile + its index in it): xr one row, or null for a
// padding slot (zeros). Tokens pack independently, so threads can split.
void PackXSlot(const float* xr, size_t k, float* slot);
// GEMM over an f32 weight on packed x (as GemmBf16); pack: PackFloatsGemmBf16(k) floats.
void GemmF32(const float* xp, size_t m, const float* w, size_t row_stride, size_t k, size_t rows,
             float* y, size_t ldy, bool accumulate, float* pack);
// out[t, 0..ldo) = bf16-rounded x[t, 0..k) as f32, zero padded to ldo.
void RoundRowsToBf16(const float* x, size_t ldx, size_t m, size_t k, float* out, size_t ldo);
// xr holds bf16-rounded values (RoundRowsToBf16). Streams w rows; good for small m.
void GemvBf16(const float* xr, size_t ldxr, size_t m, const bf16* w, size_t row_stride, size_t k,
              size_t rows, float* y, size_t ldy, bool accumulate);
// Packed-panel GEMM for larger m, on x packed by PackX (bf16-rounded values). pack: scratch of
// PackFloatsGemmBf16(k) floats.
size_t PackFloatsGemmBf16(size_t k);
void GemmBf16(const float* xp, size_t m, const bf16* w, size_t row_stride, size_t k, size_t rows,
              float* y, size_t ldy, bool accumulate, float* pack);
void GemvF32(const float* x, size_t ldx, size_t m, const float* w, size_t row_stride, size_t k,
             size_t rows, float* y, size_t ldy, bool accumulate);
// y[t, r] (= or +=) for t < m, r < w.rows of a kBf16Panel view (bf16_panels.h), x packed by
// PackX from bf16-rounded rows. Any m: decode GEMV and prefill GEMM alike.
void MatMulBf16Panels(const float* xp, size_t m, const WeightMatrix& w, float* y, size_t ldy,
                      bool accumulate);
// The blocking of this table's panel kernels (bf16 and FP8) for ForEachPanelBlockTile
// (panel_schedule.h): an x that fits L2 whole (decode batches) panel by panel, each tile summing
// the panel's whole k in registers; else 256-column blocks of 256 KiB of panels (half of Zen 3's
// L2) as the kernel's tiles read them, `column_bytes` per panel column.
struct PanelBlocking {
  size_t kc, block_panels;
};
inline PanelBlocking PanelBlockingFor(size_t m, size_t k, size_t column_bytes) {
  constexpr size_t kL2Budget = 256 * 1024, kKc = 256;
  if (m * k * sizeof(float) <= kL2Budget) return {k, 1};
  return {kKc, kL2Budget / (kKc * column_bytes)};
}
// y[t, r] (= or +=) for t < m, r < w.rows of a kFp8Panel view (fp8_panels.h), x packed by PackX
// from bf16-rounded rows, every m in one arithmetic (fp8_panels.h: block sums scaled), so a
// token's y is the same bits in any batch. pack: scratch of Fp8PanelPackFloats(w.cols) floats,
// 32-byte aligned.
size_t Fp8PanelPackFloats(size_t k);
void MatMulFp8Panels(const float* xp, size_t m, const WeightMatrix& w, float* y, size_t ldy,
                     bool accumulate, float* pack);
void SiluMul(const float* gate, const float* up, float* out, size_t n);
// Q8 activations (mxfp4_i8.h): rows x[t, 0..k) → q + t·ldq, d + t·ldd, sum + t·ldd; k % 32 == 0.
// Equals QuantizeRowQ8Reference bit for bit.
void QuantizeRowsQ8(const float* x, size_t ldx, size_t m, size_t k, int8_t* q, size_t ldq, float* d,
                    int32_t* sum, size_t ldd);
// y[t, r] (= or +=) for t < x.m, r < w.rows; w a kMxfp4I8 view (starts on a row group). Equals
// MatMulMxfp4I8Reference bit for bit; any m (decode GEMV at m = 1 .. prefill GEMM).
void MatMulMxfp4I8(const Q8Rows& x, const WeightMatrix& w, float* y, size_t ldy, bool accumulate);

// Roofline probes (calling thread only).
double SumBuffer(const float* data, size_t n);
void F32FmaChains(size_t iterations, float* sink);  // 12 chains × 16 flop per iteration each
// 12 chains of vpmaddubsw + vpaddw: 32 multiply-adds (64 int8 ops) per iteration each.
void Int8DotChains(size_t iterations, int32_t* sink);
}  // namespace avx2

// AVX-512 F / BW / VL / DQ with VNNI and no BF16 instruction (built without -mavx512bf16): the
// kernels of the avx512 table (Cascade Lake, Ice Lake and later Xeons without AVX512_BF16), which
// the avx512bf16 and amx tables share.
namespace avx512 {
void AttentionTile(const AttentionTileArgs& args);
// y[t, r] (= or +=) for t < m (< 8), r < w.rows of a kFp8Panel view, on f32 FMAs
// (matmul_fp8_panels_avx512.cc); xr: m rows (ld apart) rounded to bf16. For m <= 6 equals
// avx2::MatMulFp8Panels on the same x bit for bit (its register tiles' arithmetic).
void GemvFp8Panels(const float* xr, size_t ld, size_t m, const WeightMatrix& w, float* y,
                   size_t ldy, bool accumulate);
// The same y as GemvFp8Panels for m <= kFp8AffineGemvMaxTokens where the view starts on a
// 4-column group (w.col0 % 4 == 0), for CPUs with AVX-512 VBMI and GFNI
// (matmul_fp8_panels_avx512_gfni.cc: the codes decoded by GF(2)-affine byte maps); bit for bit
// unless a partial sum falls below 2^-118. It also takes up to kFp8AffineMaxTokens tokens, each
// token's row of y the same as alone (m = 1).
inline constexpr size_t kFp8AffineGemvMaxTokens = 7;  // every GEMV size (below kGemmMinM)
inline constexpr size_t kFp8AffineMaxTokens = 16;
// Whether the avx512 table sends m tokens (at most kFp8AffineMaxTokens) of an FP8 panel view that
// the affine GEMV could take to the GEMM (MatMulFp8Panels) instead: from 10 tokens when the GEMM's
// last 6-token register tile is full or holds 4-5 tokens (a tile of 1-3 fills at most 12 of its 24
// accumulators, where the GEMV splits the tokens into even groups). One core (Ice Lake), from
// DRAM, calls alternating in one process, GEMM / GEMV time: [3072 x 3072] at 9 / 10 / 11 / 12 /
// 13 / 14 / 15 / 16 / 17 tokens 1.12 / 0.94 / 0.91 / 0.94 / 1.03 / 1.07 / 1.10 / 0.93 / 0.82,
// [1536 x 3072] and [3072 x 1536] at 10 / 12 / 16 0.87-0.91; the same bits either way.
inline constexpr bool Fp8GemmTakesFromAffine(size_t m) {
  return m >= 10 && (m % 6 == 0 || m % 6 >= 4);
}
void GemvFp8PanelsAffine(const float* xr, size_t ld, size_t m, const WeightMatrix& w, float* y,
                         size_t ldy, bool accumulate);
// The same y for any m (meant for m >= kGemmMinM) on x packed by avx2::PackX from bf16-rounded
// rows: blocks of panels decoded once per call into f32 (unscaled) and swept by the f32 register
// tile (f32_panel_tile_avx512.h), each scale block's sums scaled into y as the block ends:
// GemvFp8Panels' arithmetic, so its bits (and GemvFp8PanelsAffine's unless a partial sum falls
// below 2^-118) whatever the batch. pack: Fp8PanelPackFloats() floats, 64-byte aligned.
size_t Fp8PanelPackFloats();
void MatMulFp8Panels(const float* xp, size_t m, const WeightMatrix& w, float* y, size_t ldy,
                     bool accumulate, float* pack);
void GemvF32(const float* x, size_t ldx, size_t m, const float* w, size_t row_stride, size_t k,
             size_t rows, float* y, size_t ldy, bool accumulate);
void SiluMul(const float* gate, const float* up, float* out, size_t n);
// y[t, r] (= or +=) for t < m, r < w.rows of a kBf16Panel view on f32 FMAs
// (matmul_bf16_panels_avx512.cc), x packed by avx2::PackX from bf16-rounded rows; any m.
void MatMulBf16Panels(const float* xp, size_t m, const WeightMatrix& w, float* y, size_t ldy,
                      bool accumulate);
// As avx2::MatMulMxfp4I8 (same contract, bit for bit), with AVX-512 VNNI (vpdpbusd): two row
// groups per zmm, up to 8 tokens per pass over a block.
void MatMulMxfp4I8(const Q8Rows& x, const WeightMatrix& w, float* y, size_t ldy, bool accumulate);

// Roofline probes: each runs on the calling thread only.
double SumBuffer(const float* data, size_t n);         // streaming read
void F32FmaChains(size_t iterations, float* sink);     // 12 chains × 32 flop per iteration each
void Int8DotChains(size_t iterations, int32_t* sink);  // vpdpbusd: 12 chains × 128 ops each
}  // namespace avx512

namespace avx512bf16 {
// Quantized GEMV (any m; meant for m < 8): codes are decoded to exact bf16 in registers and fed
// to vdpbf16ps; FP8 partial sums are multiplied by their 128-column block scale, MXFP4 scales are
// added to the bf16 exponents (exact for e8m0 in [2, 252]; other groups take a slower exact path).
void GemvFp8(const bf16* xb, size_t ldxb, size_t m, const QuantRows& w, float* y, size_t ldy,
             bool accumulate);
void GemvMxfp4(const bf16* xb, size_t ldxb, size_t m, const QuantRows& w, float* y, size_t ldy,
               bool accumulate);
// Quantized GEMM: 32-row panels decoded to bf16 in GemmBf16's packed layout (pack:
// PackElemsGemmBf16(k)); MXFP4 through a panel of rows (`panel`: 32·k elements) and GemmBf16's
// pack, then GemmBf16's tiles; FP8 straight into the pack, then a tile of its own that keeps a
// per-block accumulator in registers and applies each 128-column block's scales with one FMA per
// block into a total (`scales`: 32 · blocks floats). col0 must be even for FP8 (else GEMV).
// xt: Fp8XTileElems(m, k) uint32 for x, packed per call into the FP8 tile's token tiles.
void GemmFp8(const bf16* xb, size_t ldxb, size_t m, const QuantRows& w, float* y, size_t ldy,
             bool accumulate, bf16* pack, float* scales, uint32_t* xt);
size_t Fp8XTileElems(size_t m, size_t k);
// Rows [r0, r0 + nr) (nr ≤ 32) of an FP8 range decoded exactly to bf16 in GemmBf16's packed
// layout (PackPanelBf16), column pairs [0, ceil(k / 2)); rows ≥ nr zero.
void DecodeFp8Panel(const QuantRows& w, size_t r0, size_t nr, bf16* pack);
// One 16-row FP8 panel (fp8_panels.h: codes [k][16]) decoded exactly to bf16 column pairs: pair i
// as 16 uint32 at out + 16 i (row r: W[r, 2i] | W[r, 2i + 1] << 16, unscaled), pairs up to the
// next multiple of 16 (zero past k).
void DecodeFp8PanelPairs(const uint8_t* codes, size_t k, uint32_t* out);
void GemmMxfp4(const bf16* xb, size_t ldxb, size_t m, const QuantRows& w, float* y, size_t ldy,
               bool accumulate, bf16* panel, bf16* pack);
// pack[p][j][2] = W[j][2p .. 2p+1] for j < 32 (zero beyond `rows` and `k`): GemmBf16's layout.
void PackPanelBf16(const bf16* w, size_t row_stride, size_t k, size_t rows, bf16* pack);
// out[t, 0..ldo) = bf16(x[t, 0..k)) (round to nearest even, as F32ToBf16), zero padded; ldo even.
void ToBf16Rows(const float* x, size_t ldx, size_t m, size_t k, bf16* out, size_t ldo);
// xb: ToBf16Rows output with ldxb >= round_up(k, 2), padding zero.
void GemvBf16(const bf16* xb, size_t ldxb, size_t m, const bf16* w, size_t row_stride, size_t k,
              size_t rows, float* y, size_t ldy, bool accumulate);
size_t PackElemsGemmBf16(size_t k);
void GemmBf16(const bf16* xb, size_t ldxb, size_t m, const bf16* w, size_t row_stride, size_t k,
              size_t rows, float* y, size_t ldy, bool accumulate, bf16* pack);
// bf16 panels (bf16_panels.h) with vdpbf16ps. x: f32 rows rounded to bf16 and packed by
// PackBf16PanelX into tiles of kBf16PanelXTile tokens, each [ceil(k / 2)][kBf16PanelXTile] pairs
// (x[t, 2i] | x[t, 2i + 1] << 16 as bf16 bits; tokens past m and the column past an odd k zero),
// Bf16PanelXPairs(m, k) of them. y[t, r] (= or +=) for t < m, r < w.rows; any m.
inline constexpr size_t kBf16PanelXTile = 12;
size_t Bf16PanelXPairs(size_t m, size_t k);
void PackBf16PanelX(const float* xr, size_t ldxr, size_t m, size_t k, uint32_t* xp);
// One tile: rows[t] token t's k values (rounded to bf16 here, exactly as F32ToBf16), or null for
// a padding slot (zeros). Tiles pack independently, so threads can split them.
void PackBf16PanelXTile(const float* const rows[kBf16PanelXTile], size_t k, uint32_t* tile);
void MatMulBf16Panels(const uint32_t* xp, size_t m, const WeightMatrix& w, float* y, size_t ldy,
                      bool accumulate);
// The tokens (a multiple of kBf16PanelXTile) whose x MatMulBf16Panels keeps cached while every
// panel pair passes, for k columns: a call over more tokens runs them a block at a time.
size_t XTokenBlock(size_t k);

// Roofline probe (calling thread only): 12 chains × 64 flop per iteration each.
void Bf16DotChains(size_t iterations, float* sink);

}  // namespace avx512bf16

namespace amx {
// The attention tile with q·K and P·V on TDPBF16PS at f32 accuracy (attention_amx.cc: each f32
// operand as three bf16 parts) for head_dim % 32 == 0, ≤ 256, with args.tile_scratch; other
// shapes, and decode items (fewer than 16 rows) over an FP8 cache, take avx512::AttentionTile.
// Configures the tiles on entry, releases them on return.
void AttentionTile(const AttentionTileArgs& args);
// bf16 panels (bf16_panels.h) on the AMX tile unit (matmul_bf16_panels_amx.cc). x: f32 rows
// rounded to bf16 and packed by PackX into tiles of kXTileTokens tokens, each [ceil(k / 32)]
// [kXTileTokens][16] pairs (x[t, 2i] | x[t, 2i + 1] << 16 as bf16 bits; tokens past m and columns
// past k zero), XTileElems(m, k) uint32. y[t, r] (= or +=) for t < m, r < w.rows; any m (meant
// for m >= kGemmMinM); the B tiles are the panels' own column pairs. Configures the tiles on
// entry and releases them on return.
inline constexpr size_t kXTileTokens = 16;
size_t XTileElems(size_t m, size_t k);
// Scratch (uint32) for two panels' B tiles of k columns (the FP8 tile kernels decode into it).
size_t WTileElems(size_t k);
void PackX(const float* xr, size_t ldxr, size_t m, size_t k, uint32_t* xt);
// One tile: rows[t] token t's k values (rounded here exactly as F32ToBf16), or null for a padding
// slot (zeros). Tiles pack independently, so threads can split them.
void PackXTile(const float* const rows[kXTileTokens], size_t k, uint32_t* tile);
void MatMulBf16Panels(const uint32_t* xt, size_t m, const WeightMatrix& w, float* y, size_t ldy,
                      bool accumulate);
// The tokens (a multiple of 2 · kXTileTokens) whose A tiles the FP8 tile kernels keep in L2 while
// every panel pair passes, for k columns: a call over more runs them a block at a time.
size_t XTokenBlock(size_t k);
// The bf16 tile kernel's token block: XTokenBlock(k) while that is at least 128 tokens (k up to
// 4096), else 256 tokens with the columns in chunks whose A tiles fit the same L2 budget (64 tile
// steps: three chunks at k = 6144), C stored to y between chunks and loaded back. Why: a panel
// pair's first pass, reading W from memory, costs 3-4 later ones (the tile unit's operand loads
// starve the prefetches), and whole-k blocks of a [3072, 6144] weight (an o projection) made it
// one of 2 passes, now one of 8. In-process A/B, one thread, W from DRAM, 512 tokens: [3072, 6144]
// 1.12-1.18x; [8192, 3072] and 128 tokens of [1536, 3072] (one chunk) 1.00-1.05x.
size_t Bf16XTokenBlock(size_t k);
// The MXFP4 × Q8 matmul of mxfp4_i8.h (bit for bit MatMulMxfp4I8Reference) with each block's
// integer dot products on the tile unit (TDPBSSD, matmul_mxfp4_i8_amx.cc); any m, for prefill
// (the amx table's from 32 tokens). Scratch: s.pack (the decoded B tiles and their rows' scales),
// s.xpack (x packed as A tiles), s.fp8_scales (the tokens' block factors). Configures the tiles on
// entry and releases them on return.
void MatMulMxfp4I8(const Q8Rows& x, const WeightMatrix& w, float* y, size_t ldy, bool accumulate,
                   WorkerScratch& s);
// Roofline probe (calling thread): iterations / kBf16TileChainDivisor rounds of 12 TDPBF16PS
// (16 · 16 · 32 multiply-adds each) on six accumulators: 12 chains × 1024 flop per iteration.
inline constexpr size_t kBf16TileChainDivisor = 16;
void Bf16TileChains(size_t iterations, float* sink);
// x's bf16 rows [m, k] (zero padded past k to the row's end, as PreparedX::b16) packed as PackX
// packs f32 rows (the values are already bf16).
void PackXBf16(const bf16* xb, size_t ldxb, size_t m, size_t k, uint32_t* xt);
// FP8-block GEMM on the tile unit (matmul_quant_amx.cc): 32-row panels decoded exactly to bf16
// (avx512bf16::DecodeFp8Panel), their products with x summed per 128-column scale block in C
// tiles and scaled into f32 totals (as the vdpbf16ps GemmFp8). Needs w.col0 % 32 == 0 (scale
// blocks on tile steps); w.rows ranges start on 32-row panels. xt: x packed by PackX / PackXBf16;
// pack: Fp8PackElems(k) bf16, scales: Fp8ScaleFloats(k) f32, 64-byte aligned scratch.
size_t Fp8PackElems(size_t k);
// The widest FP8 view (columns) the tile kernels take: their scale-block table is fixed-size.
inline constexpr size_t kMaxFp8Cols = 16000;
size_t Fp8ScaleFloats(size_t k);
void GemmFp8(const uint32_t* xt, size_t m, const QuantRows& w, float* y, size_t ldy,
             bool accumulate, bf16* pack, float* scales);
// The same on a kFp8Panel view (fp8_panels.h; w.col0 % 32 == 0), two 16-row panels per pass, any
// m (the amx table's from 4 tokens: up to 32 each step's B tiles are decoded just before use):
// wb: WTileElems(k) uint32 (two panels' B tiles), scales: Fp8ScaleFloats(k) f32, 64-byte aligned.
void MatMulFp8Panels(const uint32_t* xt, size_t m, const WeightMatrix& w, float* y, size_t ldy,
                     bool accumulate, uint32_t* wb, float* scales);
// Whether MatMulFp8Panels takes the kFp8Panel view w (its scale blocks on tile steps).
inline bool Fp8PanelTiles(const WeightMatrix& w) {
  return w.col0 % 32 == 0 && w.cols <= kMaxFp8Cols;
}
// GEMV on a kFp8Panel view with w.col0 % 4 == 0 (matmul_fp8_panels_amx.cc, AVX-512 VBMI and BF16,
// not the tile unit): y[t, r] (= or +=) for t < m (1..kFp8GemvMaxTokens), r < w.rows. xp: x as
// the vdpbf16ps panel kernels take it (avx512bf16::PackBf16PanelX: one tile of kBf16PanelXTile
// tokens).
inline constexpr size_t kFp8GemvMaxTokens = 2;
void GemvFp8Panels(const uint32_t* xp, size_t m, const WeightMatrix& w, float* y, size_t ldy,
                   bool accumulate);
}  // namespace amx

// The MatMul row-range kernel for the ISA in use, on x prepared once per call (matmul.cc).
struct PreparedX {
  const float* f32 = nullptr;  // [m, ld]: x itself (f32 W) or x rounded to bf16 (bf16 W, ≤ avx512)
  const bf16* b16 = nullptr;   // [m, ld]: x as bf16 pairs (bf16 W on avx512bf16)
  Q8Rows q8;                   // x quantized to int8 blocks (kMxfp4I8 W), else q8.q null
  // x packed once for avx512bf16::MatMulBf16Panels (kBf16Panel W on avx512bf16, when the whole x
  // is prepared for one call, or one MoE expert's rows (GroupedX): its tiles of 12 tokens cannot
  // be cut at any row); else null, and each thread packs f32 itself.
  const uint32_t* panel_pairs = nullptr;
  // Likewise x packed once by avx2::PackX for the AVX2 panel kernels (bf16 and FP8 panels).
  const float* packed_f32 = nullptr;
  // Likewise x packed once by amx::PackX for the AMX panel kernel (kBf16Panel W on amx, m at or
  // above kGemmMinM).
  const uint32_t* amx_tiles = nullptr;
  size_t ld = 0;
  size_t m = 0;

  // Rows [row0, row0 + count) of the same prepared x (not of a tiled one).
  PreparedX Rows(size_t row0, size_t count) const {
    PreparedX v = *this;
    if (v.panel_pairs || v.packed_f32 || v.amx_tiles) __builtin_trap();
    if (v.f32) v.f32 += row0 * v.ld;
    if (v.b16) v.b16 += row0 * v.ld;
    if (v.q8.q) v.q8.q += row0 * v.q8.ldq, v.q8.d += row0 * v.q8.ldd, v.q8.sum += row0 * v.q8.ldd;
    v.m = v.q8.m = count;
    return v;
  }
};

}  // namespace moeserve::kernels
