// What every kernel call runs with, resolved once (per model, per benchmark, per test) and carried
// through model::RunContext: the ISA and its table of entry points, the thread pool, and the
// scratch arenas (one per pool thread, one for the caller). Before it, each call asked BestIsa()
// and kept its scratch in thread_local buffers, which stayed with whichever thread had run the
// largest call (the warm-up on the main thread kept ~5.5 MB for nothing, issue 14), and could not
// run two ISAs side by side.
//
// Thread-safety: as the pool's: one caller at a time. Two contexts may share a pool (their
// callers take turns on it) and never share scratch.
#pragma once

#include <cstddef>
#include <memory>

#include "kernels/scratch.h"
#include "runtime/cpu_features.h"
#include "runtime/thread_pool.h"

namespace moeserve::kernels {

struct IsaKernels;

class KernelContext {
 public:
  // isa: what the kernels run (BestIsa(): the machine's, capped by MOESERVE_ISA and any live
  // ScopedIsaCap). Throws moeserve::Error for an ISA this machine or build cannot run.
  explicit KernelContext(ThreadPool& pool, Isa isa = BestIsa());
  ~KernelContext();
  KernelContext(const KernelContext&) = delete;
  KernelContext& operator=(const KernelContext&) = delete;

  ThreadPool& pool() const { return *pool_; }
  Isa isa() const { return isa_; }
  const IsaKernels& kernels() const { return *kernels_; }

  // Pool thread `thread`'s scratch (0 = the calling thread's share of a pool task).
  WorkerScratch& worker(size_t thread) { return workers_[thread]; }
  // The caller's scratch for what lives through the call.
  CallScratch& call() { return *call_; }

  // Bytes the arenas hold now: they grow to the largest call run and are then reused.
  size_t scratch_bytes() const;

 private:
  ThreadPool* pool_;
  Isa isa_;
  const IsaKernels* kernels_;
  std::unique_ptr<WorkerScratch[]> workers_;
  std::unique_ptr<CallScratch> call_;
};

}  // namespace moeserve::kernels
