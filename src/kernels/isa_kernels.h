// One table of entry points per ISA. The baseline-compiled code (matmul.cc, moe.cc,
// attention.cc, activation.cc) asks the table of the ISA in use what to run and how to lay out
// x for it, instead of branching on the ISA at every call site: adding an ISA means writing its
// kernels and filling one table (isa_kernels.cc), not editing the dispatch in every file.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/internal.h"
#include "kernels/scratch.h"
#include "kernels/weights.h"
#include "runtime/cpu_features.h"

namespace moeserve::kernels {

// The weights that have kernels of their own: WeightFormat, with dense split by dtype.
enum class WeightKind : uint8_t {
  kDenseF32,
  kDenseBf16,
  kFp8Block,
  kMxfp4,
  kMxfp4I8,
  kBf16Panel,
  kFp8Panel,
};
inline constexpr size_t kWeightKinds = 7;
WeightKind KindOf(const WeightMatrix& w);

// How x is prepared (PrepareRows, matmul.cc) for a kind's row kernel.
enum class XLayout : uint8_t {
  kF32,          // x itself, unrounded (f32 weights)
  kQ8,           // int8 blocks with f32 scales (mxfp4_i8.h)
  kRoundedF32,   // rows rounded to bf16, kept as f32, padded with zeros to 32 columns
  kBf16,         // rows as bf16, padded likewise
  kPanelPairs,   // tiles of token pairs for avx512bf16::MatMulBf16Panels (whole x only)
  kPackedTiles,  // tiles of avx2::PackX for the AVX2 panel kernels (whole x only)
  kAmxTiles,     // A tiles of amx::PackX for the AMX panel kernel (whole x only)
};

// y[t, n] (= or +=) for t < x.m and n in [n0, n1) of w, on x prepared as the table's layout for
// w's kind says (or, for the whole-x layouts, kRoundedF32 rows the kernel packs itself). Any
// thread may call it with its own scratch; n0 is a multiple of the kind's row grain, or the
// kernel copes.
using RowsFn = void (*)(const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1, float* y,
                        size_t ldy, bool accumulate, WorkerScratch& scratch);

struct IsaKernels {
  Isa isa;
  RowsFn rows[kWeightKinds];
  // x for one call over all of x (MatMul, MatMulSharedX) from kGemmMinM rows, and below it
  // (the GEMVs: decode); a row range of x (MoE: each expert's rows, PreparedX::Rows) uses
  // whole_x_layout's row form (RowLayout).
  XLayout whole_x_layout[kWeightKinds];
  XLayout gemv_x_layout[kWeightKinds];
  // Row ranges handed to rows[] are multiples of these: GEMV below kGemmMinM tokens, else GEMM.
  size_t row_grain_gemv[kWeightKinds];
  size_t row_grain_gemm[kWeightKinds];
  // x preparation, one row: Q8 blocks (mxfp4_i8.h), bf16 rounding kept in f32, bf16 (the last two
  // padded to `ld` with zeros).
  void (*quantize_row_q8)(const float* x, size_t k, int8_t* q, float* d, int32_t* sum);
  void (*round_row_to_bf16)(const float* x, size_t k, float* out, size_t ld);
  void (*row_to_bf16)(const float* x, size_t k, bf16* out, size_t ld);  // null: no kBf16 layout
  void (*silu_mul)(const float* gate, const float* up, float* out, size_t n);
  void (*attention_tile)(const AttentionTileArgs& args);

  // Roofline probes (roofline.cc), each on the calling thread: a streaming read, and 12
  // independent chains of the ISA's f32 FMA / bf16 dot / int8 dot, `ops` per chain and iteration
  // (a multiply-add counts 2). Null where the ISA has no such instruction.
  struct Probe {
    void (*run)(size_t iterations, void* sink);
    double ops;
  };
  double (*sum_buffer)(const float* data, size_t n);
  Probe f32_fma, bf16_dot, int8_dot;
  Probe bf16_tile;  // the AMX tile unit's TDPBF16PS (same 12-chain accounting), else null
};

// m at or above this uses the GEMM kernels and their row grain; below it the GEMVs: streaming the
// weight rows once and reusing each row block for all m tokens from L1 costs no packing and is as
// fast or faster (single-core measurements on [1536, 3072]: m = 3..7 GEMV 50-140 GFLOP/s, GEMM
// 50-70; the packed GEMM reaches 120 at m = 16 and ~190 at m = 512).
inline constexpr size_t kGemmMinM = 8;

// The table for `isa`.
const IsaKernels& KernelsFor(Isa isa);

// The layout of a row range of x where the whole-x layout is a tiling that cannot be cut.
inline bool IsTiled(XLayout layout) {
  return layout == XLayout::kPanelPairs || layout == XLayout::kPackedTiles ||
         layout == XLayout::kAmxTiles;
}
inline XLayout RowLayout(XLayout whole) {
  return IsTiled(whole) ? XLayout::kRoundedF32 : whole;
}

// The scalar attention tile (attention.cc): the reference's math over the paged cache.
void AttentionTileScalar(const AttentionTileArgs& args);

}  // namespace moeserve::kernels
