// A persistent pool of worker threads for the forward pass.
//
// Thread-safety contract: one caller at a time (the engine thread) calls Run / ParallelFor; calls
// do not nest (a task must not call back into the same pool). Workers never throw: a task that
// throws aborts the process, since a half-finished kernel has no state worth recovering.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace moeserve {

class ThreadPool {
 public:
  // num_threads counts the caller: ThreadPool(1) runs everything inline. 0 = all hardware threads.
  explicit ThreadPool(size_t num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t num_threads() const { return num_threads_; }

  // SPMD: fn(thread_index, num_threads) runs once on every thread (the caller is thread 0);
  // returns when all have finished.
  void Run(const std::function<void(size_t thread, size_t num_threads)>& fn);

  // Splits [0, n) into contiguous ranges, one per thread, each a multiple of `grain` items except
  // the last; fn(begin, end) per non-empty range. Static so that a thread keeps touching the same
  // rows of a weight from call to call (cache and NUMA locality).
  void ParallelFor(size_t n, size_t grain, const std::function<void(size_t begin, size_t end)>& fn);
  // The same ranges, with the index of the thread that runs each (0 = the caller): for kernels
  // whose ranges use that thread's own scratch (kernels::KernelContext::worker).
  void ParallelForWithThread(
      size_t n, size_t grain,
      const std::function<void(size_t begin, size_t end, size_t thread)>& fn);

  // Dynamic scheduling for uneven work (e.g. experts with different token counts): fn(i) for
  // i in [0, n), items handed out one at a time.
  void ParallelForDynamic(size_t n, const std::function<void(size_t i, size_t thread)>& fn);

 private:
  void WorkerLoop(size_t index);

  size_t num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  const std::function<void(size_t, size_t)>* task_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<size_t> pending_{0};
  bool stop_ = false;
};

}  // namespace moeserve
