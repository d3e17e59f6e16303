// RMSNorm, RoPE, SiluMul: fast versions vs references, references vs their definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/activation.h"
#include "kernels/norm.h"
#include "kernels/rope.h"
#include "test_util.h"

namespace moeserve::kernels {
namespace {

using testing::RandomF32;

MOESERVE_EVERY_ISA_SUITE(SiluMulEveryIsa);

TEST(RmsNormReference, MatchesDefinition) {
  const float x[3] = {1, 2, 3}, w[3] = {0.5f, 1, 2};
  float y[3];
  RmsNormReference(x, 3, w, y, 3, 1, 3, 1e-6f);
  const double rms = std::sqrt((1 + 4 + 9) / 3.0 + 1e-6);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(y[i], w[i] * x[i] / rms, 1e-6);
}

TEST(RmsNorm, MatchesReferenceAndSplitsAgree) {
  std::mt19937 rng(4);
  for (size_t width : {1, 7, 64, 100, 3072}) {
    const size_t rows = 5, ld = width + 3;
    const std::vector<float> x = RandomF32(rows * ld, rng, -4, 4);
    const std::vector<float> w = RandomF32(width, rng);
    std::vector<float> ref(rows * ld), got(rows * ld), split(rows * ld);
    RmsNormReference(x.data(), ld, w.data(), ref.data(), ld, rows, width, 1e-6f);
    RmsNorm(x.data(), ld, w.data(), got.data(), ld, rows, width, 1e-6f);
    // Tensor-parallel form: two halves' sums of squares added, each half normalised alone.
    const size_t h = width / 2;
    std::vector<float> s0(rows), s1(rows), total(rows);
    SumOfSquares(x.data(), ld, rows, h, s0.data());
    SumOfSquares(x.data() + h, ld, rows, width - h, s1.data());
    for (size_t r = 0; r < rows; ++r) total[r] = s0[r] + s1[r];
    RmsNormWithSumSq(x.data(), ld, w.data(), split.data(), ld, rows, h, total.data(), width, 1e-6f);
    RmsNormWithSumSq(x.data() + h, ld, w.data() + h, split.data() + h, ld, rows, width - h,
                     total.data(), width, 1e-6f);
    for (size_t r = 0; r < rows; ++r)
      for (size_t i = 0; i < width; ++i) {
        const float want = ref[r * ld + i];
        // The sum of squares differs from the reference's (double) by f32 rounding (~1e-6
        // relative after the square root), then one multiply: 4e-6 relative is ample.
        EXPECT_NEAR(got[r * ld + i], want, 4e-6f * std::fabs(want) + 1e-30f);
        EXPECT_NEAR(split[r * ld + i], want, 4e-6f * std::fabs(want) + 1e-30f);
      }
  }
}

TEST(RmsNormPerHead, NormalisesEachHeadAlone) {
  std::mt19937 rng(8);
  const size_t rows = 3, heads = 4, d = 10, ld = heads * d + 1;
  const std::vector<float> x = RandomF32(rows * ld, rng);
  const std::vector<float> w = RandomF32(d, rng);
  std::vector<float> got(rows * ld), want(rows * ld);
  RmsNormPerHead(x.data(), ld, w.data(), got.data(), ld, rows, heads, d, 1e-6f);
  for (size_t r = 0; r < rows; ++r)
    for (size_t h = 0; h < heads; ++h)
      RmsNormReference(&x[r * ld + h * d], d, w.data(), &want[r * ld + h * d], d, 1, d, 1e-6f);
  for (size_t r = 0; r < rows; ++r)
    for (size_t i = 0; i < heads * d; ++i)
      EXPECT_NEAR(got[r * ld + i], want[r * ld + i], 4e-6f * std::fabs(want[r * ld + i]));
}

TEST(RopeNeoxReference, MatchesAngleDefinitionAndPassesThroughTail) {
  const size_t head_dim = 8, rot = 4, heads = 2;
  std::mt19937 rng(6);
  const std::vector<float> x0 = RandomF32(heads * head_dim, rng);
  std::vector<float> x = x0;
  const int32_t pos = 7;
  const float theta = 10000.0f;
  RopeNeoxReference(x.data(), heads * head_dim, 1, heads, head_dim, rot, &pos, theta);
  for (size_t h = 0; h < heads; ++h) {
    const float* a = &x0[h * head_dim];
    const float* b = &x[h * head_dim];
    for (size_t j = 0; j < rot / 2; ++j) {
      const double angle = pos * std::pow(10000.0, -2.0 * j / rot);
      EXPECT_NEAR(b[j], a[j] * std::cos(angle) - a[j + 2] * std::sin(angle), 1e-5);
      EXPECT_NEAR(b[j + 2], a[j + 2] * std::cos(angle) + a[j] * std::sin(angle), 1e-5);
    }
    for (size_t j = rot; j < head_dim; ++j) EXPECT_EQ(b[j], a[j]);
  }
  // Position 0 is the identity.
  std::vector<float> y = x0;
  const int32_t zero = 0;
  RopeNeoxReference(y.data(), heads * head_dim, 1, heads, head_dim, rot, &zero, theta);
  EXPECT_EQ(y, x0);
}

TEST(RopeNeox, MatchesReferenceExactly) {
  std::mt19937 rng(10);
  for (size_t rot : {2, 64, 128}) {
    const size_t tokens = 9, heads = 3, head_dim = 128, ld = heads * head_dim + 7;
    std::vector<float> a = RandomF32(tokens * ld, rng), b = a;
    std::vector<int32_t> pos(tokens);
    for (size_t t = 0; t < tokens; ++t) pos[t] = static_cast<int32_t>(t * 9973 % 200000);
    RopeNeox(a.data(), ld, tokens, heads, head_dim, rot, pos.data(), 5e6f);
    RopeNeoxReference(b.data(), ld, tokens, heads, head_dim, rot, pos.data(), 5e6f);
    EXPECT_EQ(a, b);  // same f32 formulas in the same order
  }
}

TEST_P(SiluMulEveryIsa, MatchesReference) {
  std::mt19937 rng(12);
  const Isa isa = GetParam();
  ThreadPool pool(1);
  const KernelContext ctx(pool, isa);
  for (size_t n : {1, 7, 8, 15, 16, 17, 100, 1536}) {
    std::vector<float> g = RandomF32(n, rng, -20, 20), u = RandomF32(n, rng);
    if (n > 4) g[0] = -100, g[1] = 100, g[2] = 0, g[3] = -90;  // exp range ends
    std::vector<float> got(n), want(n);
    SiluMul(ctx, g.data(), u.data(), got.data(), n);
    SiluMulReference(g.data(), u.data(), want.data(), n);
    for (size_t i = 0; i < n; ++i)
      // The vector exp is within ~2 ulp of libm; one divide and one multiply follow.
      ASSERT_NEAR(got[i], want[i], 1e-6f * std::fabs(want[i]) + 1e-30f)
          << IsaName(isa) << " g=" << g[i];
  }
  // In place (out aliases gate).
  std::vector<float> g = {1, -2, 3}, u = {2, 2, 2}, want(3);
  SiluMulReference(g.data(), u.data(), want.data(), 3);
  SiluMul(ctx, g.data(), u.data(), g.data(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(g[i], want[i], 1e-6f * std::fabs(want[i]));
}

}  // namespace
}  // namespace moeserve::kernels
