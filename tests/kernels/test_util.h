// Shared helpers for the kernel tests: one run per ISA, random data, tolerances.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/matmul.h"
#include "runtime/cpu_features.h"

namespace moeserve::kernels::testing {

// Kernel tests that run once per ISA: declare the suite with MOESERVE_EVERY_ISA_SUITE(Suite) and
// write TEST_P(Suite, Name). Each test builds its KernelContext for isa() (and runs under a
// ScopedIsaCap for it, for code that asks BestIsa()); an ISA this machine (or build) lacks shows
// as SKIPPED with the reason, so a run on an AVX2-only machine says which paths it did not check
// instead of leaving them out silently.
class EveryIsa : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (GetParam() > MachineIsa())
      GTEST_SKIP() << IsaName(GetParam()) << " is not available on this machine (it runs "
                   << IsaName(MachineIsa()) << ")";
    cap_.emplace(GetParam());
  }
  Isa isa() const { return GetParam(); }

 private:
  std::optional<ScopedIsaCap> cap_;
};

inline std::string IsaTestName(const ::testing::TestParamInfo<Isa>& info) {
  return IsaName(info.param);
}

#define MOESERVE_EVERY_ISA_SUITE(suite)                                                            \
  class suite : public ::moeserve::kernels::testing::EveryIsa {};                                  \
  INSTANTIATE_TEST_SUITE_P(, suite,                                                                \
                           ::testing::Values(::moeserve::Isa::kScalar, ::moeserve::Isa::kAvx2,     \
                                             ::moeserve::Isa::kAvx512,                             \
                                             ::moeserve::Isa::kAvx512Bf16, ::moeserve::Isa::kAmx), \
                           ::moeserve::kernels::testing::IsaTestName)

// MatMul of m tokens (x: m rows of w.cols) together equals each token's MatMul alone, bit for
// bit: a token's y does not depend on its batch. With y0 (m rows of w.rows) both calls add into
// a copy of it instead (MatMul's accumulate). `what` names the case in a failure.
inline void ExpectTokensTogetherEqualAlone(const std::vector<float>& x, size_t m,
                                           const WeightMatrix& w, KernelContext& ctx,
                                           const std::string& what,
                                           const std::vector<float>& y0 = {}) {
  const size_t k = w.cols, n = w.rows;
  const bool accumulate = !y0.empty();
  std::vector<float> together = accumulate ? y0 : std::vector<float>(m * n), alone = together;
  MatMul(x.data(), k, m, w, together.data(), n, ctx, accumulate);
  for (size_t t = 0; t < m; ++t)
    MatMul(x.data() + t * k, k, 1, w, alone.data() + t * n, n, ctx, accumulate);
  for (size_t i = 0; i < together.size(); ++i)
    ASSERT_EQ(std::memcmp(&together[i], &alone[i], 4), 0)
        << what << (accumulate ? " accumulate" : "") << " m " << m << " i " << i;
}

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
