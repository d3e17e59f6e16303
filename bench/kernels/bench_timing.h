// Timing shared by the kernel benchmarks: median and best of repeated runs after a warm-up.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace moeserve::kernels::bench {

// Median of the values (the upper one of an even count).
inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

inline double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Both are printed: the median is the figure asked for, the best is what the kernel does when no
// other process competes for the cores (shared machines).
struct Timing {
  double median_s, best_s;
};

// fn(r) is called once with r = 0 to warm up (page faults, scratch growth), then with r = 1..runs
// timed; r lets a benchmark rotate its inputs (weights cycled through more than the LLC).
template <typename Fn>
Timing Time(int runs, const Fn& fn) {
  fn(0);
  std::vector<double> t;
  for (int r = 0; r < runs; ++r) {
    const double t0 = Now();
    fn(r + 1);
    t.push_back(Now() - t0);
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t[0]};
}

}  // namespace moeserve::kernels::bench
