// Shared helpers for the kernel tests: ISA scoping, random data, tolerances.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "runtime/cpu_features.h"

namespace moeserve::kernels::testing {

// Every ISA path this machine can run; tests loop over them with IsaScope.
inline std::vector<Isa> AvailableIsas() {
  unsetenv("MOESERVE_ISA");
  std::vector<Isa> out;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16})
    if (isa <= BestIsa()) out.push_back(isa);
  return out;
}

// Caps BestIsa() (MOESERVE_ISA) for the scope's lifetime.
class IsaScope {
 public:
  explicit IsaScope(Isa isa) {
    if (const char* old = std::getenv("MOESERVE_ISA")) old_ = old;
    setenv("MOESERVE_ISA", IsaName(isa).c_str(), 1);
  }
  ~IsaScope() {
    if (old_)
      setenv("MOESERVE_ISA", old_->c_str(), 1);
    else
      unsetenv("MOESERVE_ISA");
  }

 private:
  std::optional<std::string> old_;
};

inline std::vector<float> RandomF32(size_t n, std::mt19937& rng, float lo = -1, float hi = 1) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

inline std::vector<bf16> RandomBf16(size_t n, std::mt19937& rng, float lo = -1, float hi = 1) {
  std::vector<bf16> v(n);
  for (bf16& x : v) x = F32ToBf16(std::uniform_real_distribution<float>(lo, hi)(rng));
  return v;
}

// f32 unit roundoff.
constexpr double kU = 1.0 / (1 << 24);

// Tolerance for two f32 sums of the same n products taken in different orders (blocked SIMD
// lanes vs a running sum). The worst-case bound n·u·Σ|terms| is too loose to notice one dropped
// term of a long sum, so we use the typical size of accumulated rounding error, a random walk of
// ~sqrt(n) roundings of partial sums no larger than Σ|terms|, with a 16x margin.
inline double SumTolerance(size_t n, double abs_sum) {
  return 16.0 * std::sqrt(static_cast<double>(n) + 1) * kU * abs_sum + 1e-30;
}

}  // namespace moeserve::kernels::testing
