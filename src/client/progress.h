// A progress bar on stderr (done/total, rate, elapsed, ETA) that many threads may advance, and a
// ParallelFor over plain threads for I/O-bound work (each worker blocks on HTTP).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace moeserve::client {

class ProgressBar {
 public:
  // `enabled` false prints nothing. On a terminal the bar redraws in place (at most every 100 ms);
  // otherwise a line is printed at every 10% so logs stay short.
  ProgressBar(std::string label, size_t total, bool enabled);
  void Advance(size_t n = 1);  // thread-safe
  void Finish();               // prints the final state and a newline

 private:
  void Draw(bool force);

  std::string label_;
  size_t total_;
  bool enabled_, tty_;
  std::mutex mu_;
  size_t done_ = 0;
  size_t last_decile_ = 0;
  size_t last_printed_done_ = SIZE_MAX;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// Runs fn(worker, i) for every i in [0, n) on `workers` threads (at least 1, at most n); items are
// handed out in increasing order. fn must not throw (catch inside and record the failure).
void ParallelFor(size_t n, size_t workers, const std::function<void(size_t worker, size_t i)>& fn);

}  // namespace moeserve::client
