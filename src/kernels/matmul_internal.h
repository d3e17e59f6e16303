// MatMul split into its two halves so that fused callers (MoeExperts) can prepare x once and run
// row ranges of several weights inside one pool.Run. Baseline-compiled; dispatches on Isa.
#pragma once

#include <cstddef>
#include <cstdlib>

#include "kernels/internal.h"
#include "kernels/weights.h"
#include "runtime/cpu_features.h"
#include "runtime/thread_pool.h"

namespace moeserve::kernels {

// A growable 64-byte-aligned scratch buffer; reused across calls so hot paths do not allocate.
class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer() { std::free(data_); }
  // At least `bytes` bytes; previous contents are not kept.
  void* Get(size_t bytes);
  template <typename T>
  T* As(size_t count) {
    return static_cast<T*>(Get(count * sizeof(T)));
  }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Throws moeserve::Error unless w is a well-formed view of a supported format (weights.h).
void CheckWeight(const WeightMatrix& w);

// Converts x for `isa` and the weight `w` it will multiply (bf16 rounding, or bf16 packing on
// avx512bf16) into `buf`, or points at x itself for f32 weights; kMxfp4I8 weights get int8
// blocks (mxfp4_i8.h), every other format (bf16, FP8-block, MXFP4) the bf16 preparation. Runs on
// the calling thread.
PreparedX PrepareX(Isa isa, const WeightMatrix& w, const float* x, size_t ldx, size_t m, size_t k,
                   ScratchBuffer& buf);

// The same over the pool's threads, row i of the result taken from x row rows[i] (rows: null for
// the identity). With a gather and f32 weights the rows are copied into `buf`. Replaces a serial
// gather-then-convert that cost MoE prefill two full passes over [tokens × top-k, hidden] on one
// thread while the other waited.
PreparedX PrepareXParallel(Isa isa, const WeightMatrix& w, const float* x, size_t ldx,
                           const size_t* rows, size_t m, size_t k, ScratchBuffer& buf,
                           ThreadPool& pool);

// y[t, n] for n in [n0, n1): any thread may call it (scratch is thread_local).
void MatMulRows(Isa isa, const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1, float* y,
                size_t ldy, bool accumulate);

// Row counts that row ranges should be multiples of (a GEMM panel, or a GEMV row group).
size_t MatMulRowGrain(Isa isa, const WeightMatrix& w, size_t m);

// The isa-specific SiluMul.
void SiluMulIsa(Isa isa, const float* gate, const float* up, float* out, size_t n);

}  // namespace moeserve::kernels
