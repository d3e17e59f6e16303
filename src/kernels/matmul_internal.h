// MatMul split into its two halves so that fused callers (MoeExperts) can prepare x once and run
// row ranges of several weights inside one pool.Run. Baseline-compiled; the context's table says
// what each ISA runs.
#pragma once

#include <cstddef>

#include "kernels/context.h"
#include "kernels/internal.h"
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

// y[t, n] for n in [n0, n1): any pool thread may call it with its own scratch.
void MatMulRows(const KernelContext& ctx, const PreparedX& x, const WeightMatrix& w, size_t n0,
                size_t n1, float* y, size_t ldy, bool accumulate, WorkerScratch& scratch);

// Row counts that row ranges should be multiples of (a GEMM panel, or a GEMV row group).
size_t MatMulRowGrain(const KernelContext& ctx, const WeightMatrix& w, size_t m);

}  // namespace moeserve::kernels
