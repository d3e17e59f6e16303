#include "runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "runtime/cpu_features.h"

namespace moeserve {
namespace {

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  for (size_t threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (size_t n : {0, 1, 7, 64, 1001}) {
      for (size_t grain : {1, 4, 16}) {
        std::vector<std::atomic<int>> hits(n);
        pool.ParallelFor(n, grain, [&](size_t b, size_t e) {
          EXPECT_LT(b, e);
          for (size_t i = b; i < e; ++i) hits[i]++;
        });
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n << " " << grain;
      }
    }
  }
}

// Each range once, on the thread it names: one range per thread, so a range's thread index is
// never seen twice in a call (what per-thread scratch relies on).
TEST(ThreadPool, ParallelForWithThreadNamesTheRunningThread) {
  for (size_t threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (size_t n : {1, 2, 7, 100}) {
      std::vector<std::atomic<int>> hits(n), per_thread(threads);
      std::vector<std::thread::id> id_of(threads);
      pool.ParallelForWithThread(n, 2, [&](size_t b, size_t e, size_t t) {
        ASSERT_LT(t, threads);
        per_thread[t]++;
        id_of[t] = std::this_thread::get_id();
        for (size_t i = b; i < e; ++i) hits[i]++;
      });
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1);
      for (size_t t = 0; t < threads; ++t) ASSERT_LE(per_thread[t].load(), 1);
      // Thread 0 is the caller, as in Run.
      if (per_thread[0].load()) {
        EXPECT_EQ(id_of[0], std::this_thread::get_id());
      }
    }
  }
}

TEST(ThreadPool, DynamicCoversEveryIndexOnce) {
  ThreadPool pool(3);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::atomic<int>> hits(37);
    pool.ParallelForDynamic(37, [&](size_t i, size_t t) {
      EXPECT_LT(t, 3u);
      hits[i]++;
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

TEST(ThreadPool, RunGivesEachThreadItsIndex) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> seen(4);
  pool.Run([&](size_t t, size_t n) {
    EXPECT_EQ(n, 4u);
    seen[t]++;
  });
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}

// The pool's memory-ordering contract with plain (non-atomic) data, as kernels use it: what the
// caller wrote before Run is visible to every task, and what the tasks wrote is visible to the
// caller once Run returns. Back-to-back calls reuse the same buffers, so a missing
// happens-before edge (pending_ / generation_ ordering, task_ handoff) is a data race that the
// tsan preset reports.
TEST(ThreadPool, RunPublishesPlainDataBothWays) {
  for (size_t threads : {2, 3}) {
    ThreadPool pool(threads);
    std::vector<size_t> input(threads), output(threads);
    for (size_t round = 0; round < 200; ++round) {
      for (size_t t = 0; t < threads; ++t) input[t] = round * 10 + t;
      pool.Run([&](size_t t, size_t) { output[t] = input[t] + 1; });
      for (size_t t = 0; t < threads; ++t) ASSERT_EQ(output[t], round * 10 + t + 1);
    }
  }
}

TEST(CpuFeatures, ScopedCapsNestAndNeverRaiseTheIsa) {
  const Isa best = BestIsa();
  {
    ScopedIsaCap scalar(Isa::kScalar);
    EXPECT_EQ(BestIsa(), Isa::kScalar);
    {
      ScopedIsaCap higher(Isa::kAmx);  // a cap never raises past what the machine runs
      EXPECT_EQ(BestIsa(), std::min(best, Isa::kAmx));
    }
    EXPECT_EQ(BestIsa(), Isa::kScalar);
  }
  EXPECT_EQ(BestIsa(), best);
  EXPECT_LE(best, MachineIsa());
}

TEST(CpuFeatures, IsaNamesRoundTrip) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx})
    EXPECT_EQ(ParseIsaName(IsaName(isa)), isa);
  EXPECT_EQ(ParseIsaName("avx3"), std::nullopt);
  EXPECT_EQ(ParseIsaName(""), std::nullopt);
}

}  // namespace
}  // namespace moeserve
