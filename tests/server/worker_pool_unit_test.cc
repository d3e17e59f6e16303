#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "server/worker_pool.h"

namespace moeserve::server {
namespace {

using namespace std::chrono_literals;

// Waits (up to 10 s) until `cond` holds.
template <class F>
bool Eventually(F cond) {
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// A job that blocks until `release` is set; counts itself in `running`.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::atomic<int> running{0};
  std::function<void()> Job() {
    return [this] {
      ++running;
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return open; });
      --running;
    };
  }
  void Open() {
    std::lock_guard lock(mu);
    open = true;
    cv.notify_all();
  }
};

// Runs one job on the pool and returns the id of the thread that ran it.
std::thread::id RunOne(WorkerPool& pool) {
  std::promise<std::thread::id> p;
  pool.Post([&] { p.set_value(std::this_thread::get_id()); });
  return p.get_future().get();
}

// The soak's drift (issue 14): requests one after another must not visit the pool's threads in
// turn (each thread that ran a handler keeps per-thread memory), even after a burst started many.
TEST(WorkerPool, SequentialJobsAfterABurstRunOnTheLastIdleThread) {
  WorkerPool pool(64, 0, 10s);
  Gate gate;
  for (int i = 0; i < 16; ++i) pool.Post(gate.Job());
  ASSERT_TRUE(Eventually([&] { return gate.running == 16; }));
  EXPECT_EQ(pool.threads(), 16u);
  gate.Open();
  ASSERT_TRUE(Eventually([&] { return pool.idle_threads() == 16; }));
  std::set<std::thread::id> used;
  for (int i = 0; i < 200; ++i) {
    used.insert(RunOne(pool));
    ASSERT_TRUE(Eventually([&] { return pool.idle_threads() == pool.threads(); }));
  }
  EXPECT_EQ(used.size(), 1u);
  EXPECT_EQ(pool.threads_started(), 16u);
}

TEST(WorkerPool, GrowsToMaxThenQueuesInOrder) {
  WorkerPool pool(3, 0, 10s);
  Gate gate;
  for (int i = 0; i < 3; ++i) pool.Post(gate.Job());
  ASSERT_TRUE(Eventually([&] { return gate.running == 3; }));
  std::mutex mu;
  std::vector<int> order;
  for (int i = 0; i < 5; ++i)
    pool.Post([&, i] {
      std::lock_guard lock(mu);
      order.push_back(i);
    });
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(pool.threads(), 3u);  // the queued jobs wait for a thread
  {
    std::lock_guard lock(mu);
    EXPECT_TRUE(order.empty());
  }
  gate.Open();
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard lock(mu);
    return order.size() == 5;
  }));
  EXPECT_EQ(pool.threads_started(), 3u);
  std::lock_guard lock(mu);
  EXPECT_EQ(std::set<int>(order.begin(), order.end()).size(), 5u);  // each ran once
}

TEST(WorkerPool, IdleThreadsEndDownToMin) {
  WorkerPool pool(8, 2, 50ms);
  Gate gate;
  for (int i = 0; i < 6; ++i) pool.Post(gate.Job());
  ASSERT_TRUE(Eventually([&] { return gate.running == 6; }));
  gate.Open();
  ASSERT_TRUE(Eventually([&] { return pool.threads() == 2; }));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(pool.threads(), 2u);  // min_threads stay
  RunOne(pool);                   // and still work
  EXPECT_EQ(pool.threads_started(), 6u);
}

// on_idle runs on the thread that ran the job, once the queue is empty (the server flushes that
// thread's malloc cache there); not between queued jobs.
TEST(WorkerPool, OnIdleRunsOnTheWorkerWhenNoJobIsQueued) {
  std::mutex mu;
  std::vector<std::thread::id> idle_on;
  WorkerPool pool(1, 0, 10s, [&] {
    std::lock_guard lock(mu);
    idle_on.push_back(std::this_thread::get_id());
  });
  const std::thread::id ran = RunOne(pool);
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard lock(mu);
    return idle_on.size() == 1;
  }));
  EXPECT_EQ(idle_on[0], ran);
  // One thread, three jobs queued behind a blocked one: on_idle once, after the last.
  Gate gate;
  pool.Post(gate.Job());
  ASSERT_TRUE(Eventually([&] { return gate.running == 1; }));
  std::atomic<int> done{0};
  for (int i = 0; i < 3; ++i) pool.Post([&] { ++done; });
  gate.Open();
  ASSERT_TRUE(Eventually([&] { return done == 3; }));
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard lock(mu);
    return idle_on.size() == 2;
  }));
  std::this_thread::sleep_for(20ms);
  std::lock_guard lock(mu);
  EXPECT_EQ(idle_on.size(), 2u);
}

TEST(WorkerPool, JoinRunsQueuedJobsAndEndsEveryThread) {
  std::atomic<int> done{0};
  {
    WorkerPool pool(2, 0, 10s);
    for (int i = 0; i < 50; ++i)
      pool.Post([&] {
        std::this_thread::sleep_for(1ms);
        ++done;
      });
    pool.Join();
    EXPECT_EQ(done.load(), 50);
    EXPECT_EQ(pool.threads(), 0u);
    pool.Post([&] { ++done; });  // dropped after Join
  }
  EXPECT_EQ(done.load(), 50);
}

}  // namespace
}  // namespace moeserve::server
