// The threads that run the HTTP handlers which block (a non-streamed completion waits for the
// engine on its thread). Unlike asio::thread_pool, whose idle threads take turns (futex wake order
// is first-come, so N requests one after another visit N different threads), this pool:
//  - hands a job to the thread that went idle last (LIFO), so the threads in use are as many as
//    the handlers running at once, not all of them in rotation;
//  - starts threads on demand, up to max_threads; a job posted while all of them are busy waits
//    in a queue (first in, first out);
//  - lets a thread that has been idle for idle_exit end, down to min_threads;
//  - runs on_idle (when given) on a thread that has finished its job and finds none queued, before
//    it waits: the server hands the thread's malloc cache back there (memory_release.h
//    ReleaseThreadCache), so idle threads do not each sit on freed memory.
// Why (issue 14, soak): every thread that has run a handler keeps per-thread memory for good:
// glibc's tcache (up to 7 freed blocks per size class up to 1 KiB, which malloc_trim cannot
// return and which pin their arena pages), the tokenizer's thread-local PCRE2 match state and
// buffers, its stack's deepest pages. asio::thread_pool's 264 workers (max-num-seqs + 8) all
// ran handlers within the soak's first 30 s and kept ~80 KB each: its idle RSS at the baseline
// was 71.4 MB with 269 threads, 52.5 MB with this pool (~24 threads when idle), and it crept on
// (+4.2 MB over the last 140 s of a 240 s run) as each worker's share grew.
// Thread-safe. The destructor joins (Join).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

namespace moeserve::server {

class WorkerPool {
 public:
  WorkerPool(size_t max_threads, size_t min_threads = 0,
             std::chrono::milliseconds idle_exit = std::chrono::seconds(2),
             std::function<void()> on_idle = nullptr);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Runs `job` on a pool thread; never blocks. `job` must not throw. Jobs posted after Join has
  // begun are dropped. Throws std::system_error only when no thread runs and none can start.
  void Post(std::function<void()> job);
  // Runs the queued jobs, then ends every thread and waits for them.
  void Join();

  // Threads alive now, waiting for a job now, ever started (for tests and the log).
  size_t threads() const;
  size_t idle_threads() const;
  size_t threads_started() const;

 private:
  struct Worker;
  void Loop(Worker* self);

  const size_t max_threads_, min_threads_;
  const std::chrono::milliseconds idle_exit_;
  const std::function<void()> on_idle_;
  mutable std::mutex mu_;
  std::condition_variable all_exited_;
  std::vector<Worker*> idle_;                // the last to go idle at the back
  std::deque<std::function<void()>> queue_;  // jobs waiting for a thread
  size_t threads_ = 0, started_ = 0;
  bool stopping_ = false;
};

}  // namespace moeserve::server
