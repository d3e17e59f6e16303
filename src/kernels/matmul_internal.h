// MatMul split into its two halves so that fused callers (MoeExperts) can prepare x once and run
// row ranges of several weights inside one pool.Run. Baseline-compiled; the context's table says
// what each ISA runs.
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/context.h"
#include "kernels/internal.h"
#include "kernels/isa_kernels.h"
#include "kernels/weights.h"

namespace moeserve::kernels {

// Throws moeserve::Error unless w is a well-formed view of a supported format (weights.h).
void CheckWeight(const WeightMatrix& w);

// Converts x for the context's ISA and the weight `w` it will multiply (bf16 rounding, or bf16
// packing on avx512bf16) into `buf`, or points at x itself for f32 weights; kMxfp4I8 weights get
// int8 blocks (mxfp4_i8.h), every other format (bf16, FP8-block, MXFP4) the bf16 preparation,
// over the pool's threads. Row i of the result is taken from x row rows[i] (rows: null for the
// identity); with a gather and f32 weights the rows are copied into `buf`. (Replaced a serial
// gather-then-convert that cost MoE prefill two full passes over [tokens × top-k, hidden] on one
// thread while the other waited.) The result can be cut into row ranges (PreparedX::Rows).
PreparedX PrepareXParallel(KernelContext& ctx, const WeightMatrix& w, const float* x, size_t ldx,
                           const size_t* rows, size_t m, size_t k, ScratchBuffer& buf);

// x for row groups (MoeExperts: group g = rows [offset[g], offset[g + 1]) of the gathered x, one
// expert's), prepared once on all threads, each group a whole x of its own: for the panel
// kernels' tiled layouts a group's token tiles start at its first row, so every row range of
// MatMulRows(Group(g), ...) reads the tiles packed here. Before, each thread packed the group's
// x again for every row range it ran (3-4 times per expert on 2 threads) from a rounded copy of
// all of x. Other layouts are PrepareXParallel's rows. `offset` (groups + 1 entries) must outlive
// this object.
class GroupedX {
 public:
  GroupedX(KernelContext& ctx, const WeightMatrix& w, const float* x, size_t ldx,
           const size_t* rows, const size_t* offset, size_t groups, size_t k, ScratchBuffer& buf);
  // Groups of an x prepared in rows (not tiled) elsewhere, e.g. AllocateQ8X filled by the caller.
  static GroupedX OfRows(const PreparedX& px, const size_t* offset);
  PreparedX Group(size_t g) const;

 private:
  GroupedX(const PreparedX& px, const size_t* offset) : px_(px), offset_(offset) {}

  PreparedX px_;
  const size_t* offset_;
  std::vector<size_t> tile_;  // tiled layouts: group g's first tile (groups + 1); else empty
  size_t tile_elems_ = 0;
};

// Whether w's row ranges (MatMulRows on PreparedX::Rows) take x as int8 blocks (PreparedX::q8)
// on the context's ISA, i.e. w is kMxfp4I8 there.
bool TakesQ8Rows(const KernelContext& ctx, const WeightMatrix& w);

// The int8-block x that PrepareXParallel makes for such a w, m rows of k columns (k % 32 == 0),
// allocated in `buf` but not filled: for callers that quantize rows, or 32-column blocks of rows,
// themselves (kernels().quantize_row_q8; the blocks are independent).
PreparedX AllocateQ8X(size_t m, size_t k, ScratchBuffer& buf);

// x[0, n) quantized into row `row`, columns [col0, col0 + n) of an AllocateQ8X result (col0 and n
// multiples of 32): the same bytes as quantizing the whole row, block for block.
void QuantizeIntoQ8X(const KernelContext& ctx, const PreparedX& px, size_t row, size_t col0,
                     const float* x, size_t n);

// y[t, n] for n in [n0, n1): any pool thread may call it with its own scratch.
void MatMulRows(const KernelContext& ctx, const PreparedX& x, const WeightMatrix& w, size_t n0,
                size_t n1, float* y, size_t ldy, bool accumulate, WorkerScratch& scratch);

// Row counts that row ranges should be multiples of (a GEMM panel, or a GEMV row group).
size_t MatMulRowGrain(const KernelContext& ctx, const WeightMatrix& w, size_t m);
// A multiple of MatMulRowGrain(ctx, w, m) for every m.
size_t MatMulRowGrainForAnyM(const KernelContext& ctx, const WeightMatrix& w);

}  // namespace moeserve::kernels
