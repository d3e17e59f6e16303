// Summary statistics with numpy's definitions, so figures match the Python tools' reports.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace moeserve::client {

// np.mean, except that an empty input gives 0 (as vLLM's `np.mean(x or 0)`).
inline double Mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// np.std (population, ddof 0); 0 for an empty input.
inline double StdDev(const std::vector<double>& v) {
  if (v.empty()) return 0;
  const double m = Mean(v);
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(v.size()));
}

// np.percentile with the default linear interpolation between closest ranks; 0 when empty.
inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * frac;
}

}  // namespace moeserve::client
