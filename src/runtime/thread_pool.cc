#include "runtime/thread_pool.h"

#include <algorithm>

#include "core/check.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define MOESERVE_PAUSE() _mm_pause()
#else
#define MOESERVE_PAUSE() ((void)0)
#endif

namespace moeserve {
namespace {
// Spin this many rounds before sleeping: a decode step launches hundreds of small kernels, and a
// futex wake per kernel would cost more than the kernel.
constexpr int kSpinRounds = 20000;
}  // namespace

ThreadPool::ThreadPool(size_t num_threads) {
  if (num_threads == 0) num_threads = std::max(1u, std::thread::hardware_concurrency());
  num_threads_ = num_threads;
  for (size_t i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::WorkerLoop(size_t index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kSpinRounds; ++spin) {
      MOESERVE_PAUSE();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
      gen = generation_.load();
    }
    seen = gen;
    const std::function<void(size_t, size_t)>* task;
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
      task = task_;
    }
    (*task)(index, num_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::Run(const std::function<void(size_t, size_t)>& fn) {
  if (num_threads_ == 1) {
    fn(0, 1);
    return;
  }
  {
    std::lock_guard lock(mu_);
    task_ = &fn;
    pending_.store(num_threads_ - 1, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  fn(0, num_threads_);
  while (pending_.load(std::memory_order_acquire) != 0) MOESERVE_PAUSE();
}

void ThreadPool::ParallelFor(size_t n, size_t grain,
                             const std::function<void(size_t, size_t)>& fn) {
  ParallelForWithThread(n, grain, [&](size_t begin, size_t end, size_t) { fn(begin, end); });
}

void ThreadPool::ParallelForWithThread(size_t n, size_t grain,
                                       const std::function<void(size_t, size_t, size_t)>& fn) {
  if (n == 0) return;
  grain = std::max<size_t>(grain, 1);
  const size_t chunks = (n + grain - 1) / grain;
  const size_t threads = std::min(num_threads_, chunks);
  if (threads <= 1) {
    fn(0, n, 0);
    return;
  }
  Run([&](size_t t, size_t) {
    if (t >= threads) return;
    const size_t c0 = chunks * t / threads, c1 = chunks * (t + 1) / threads;
    const size_t begin = c0 * grain, end = std::min(n, c1 * grain);
    if (begin < end) fn(begin, end, t);
  });
}

void ThreadPool::ParallelForDynamic(size_t n, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  if (num_threads_ == 1 || n == 1) {
    for (size_t i = 0; i < n; ++i) fn(i, 0);
    return;
  }
  std::atomic<size_t> next{0};
  Run([&](size_t t, size_t) {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i, t);
  });
}

}  // namespace moeserve
