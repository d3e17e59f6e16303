#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/thread_pool.h"
#include "test_util.h"

namespace moeserve::kernels {
namespace {

using testing::ExpectTokensTogetherEqualAlone;
using testing::RandomBf16;
using testing::RandomF32;
using testing::SumTolerance;

MOESERVE_EVERY_ISA_SUITE(MatMulEveryIsa);

struct Case {
  size_t m, rows, cols, row_stride, ldx, ldy;
};

// Σ_k |x_k · w_k| for the tolerance; x rounded to bf16 as the kernels do.
double AbsSum(const float* x, const WeightMatrix& w, size_t n) {
  double s = 0;
  for (size_t k = 0; k < w.cols; ++k) {
    if (w.dtype == DType::kBF16)
      s += std::fabs(double{RoundToBf16(x[k])} *
                     Bf16ToF32(static_cast<const bf16*>(w.data)[n * w.row_stride + k]));
    else
      s += std::fabs(double{x[k]} * static_cast<const float*>(w.data)[n * w.row_stride + k]);
  }
  return s;
}

void CheckAgainstReference(const Case& c, DType dtype, bool accumulate, KernelContext& ctx,
                           std::mt19937& rng) {
  const std::vector<float> x = RandomF32(c.m * c.ldx, rng);
  std::vector<bf16> wb;
  std::vector<float> wf;
  WeightMatrix w;
  if (dtype == DType::kBF16) {
    wb = RandomBf16(c.rows * c.row_stride, rng);
    w = {DType::kBF16, wb.data(), c.rows, c.cols, c.row_stride};
  } else {
    wf = RandomF32(c.rows * c.row_stride, rng);
    w = {DType::kF32, wf.data(), c.rows, c.cols, c.row_stride};
  }
  const std::vector<float> y0 = RandomF32(c.m * c.ldy, rng);
  std::vector<float> ref = y0, got = y0;
  MatMulReference(x.data(), c.ldx, c.m, w, ref.data(), c.ldy, accumulate);
  MatMul(x.data(), c.ldx, c.m, w, got.data(), c.ldy, ctx, accumulate);
  for (size_t t = 0; t < c.m; ++t) {
    for (size_t n = 0; n < c.ldy; ++n) {
      const size_t i = t * c.ldy + n;
      if (n >= c.rows) {  // columns past the output must be untouched
        ASSERT_EQ(got[i], y0[i]) << "t=" << t << " n=" << n;
        continue;
      }
      const double tol =
          SumTolerance(c.cols, AbsSum(&x[t * c.ldx], w, n) + (accumulate ? std::fabs(y0[i]) : 0));
      ASSERT_NEAR(got[i], ref[i], tol) << "m=" << c.m << " rows=" << c.rows << " cols=" << c.cols
                                       << " t=" << t << " n=" << n << " " << IsaName(ctx.isa());
    }
  }
}

TEST(MatMulReference, MatchesDoubleDefinitionWithBf16RoundedInput) {
  std::mt19937 rng(1);
  const size_t m = 3, rows = 5, cols = 37;
  const std::vector<float> x = RandomF32(m * cols, rng);
  const std::vector<bf16> w = RandomBf16(rows * cols, rng);
  std::vector<float> y(m * rows);
  MatMulReference(x.data(), cols, m, Bf16Matrix(w.data(), rows, cols), y.data(), rows);
  for (size_t t = 0; t < m; ++t)
    for (size_t n = 0; n < rows; ++n) {
      double exact = 0, abs_sum = 0;
      for (size_t k = 0; k < cols; ++k) {
        const double p = double{RoundToBf16(x[t * cols + k])} * Bf16ToF32(w[n * cols + k]);
        exact += p;
        abs_sum += std::fabs(p);
      }
      // Worst-case bound of a running f32 sum (products of two bf16 are exact in f32).
      EXPECT_NEAR(y[t * rows + n], exact, cols * testing::kU * abs_sum);
    }
}

TEST(MatMulReference, RoundsInputToBf16OnlyForBf16Weights) {
  const float x = 1.0f + 1.0f / 1024;  // not a bf16 value: rounds to 1.0
  const bf16 wb = F32ToBf16(1.0f);
  const float wf = 1.0f;
  float y = 0;
  MatMulReference(&x, 1, 1, Bf16Matrix(&wb, 1, 1), &y, 1);
  EXPECT_EQ(y, 1.0f);
  MatMulReference(&x, 1, 1, F32Matrix(&wf, 1, 1), &y, 1);
  EXPECT_EQ(y, x);
  MatMulReference(&x, 1, 1, F32Matrix(&wf, 1, 1), &y, 1, /*accumulate=*/true);
  EXPECT_EQ(y, 2 * x);
}

TEST_P(MatMulEveryIsa, RoundsInputToBf16) {
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  // Halfway cases: round to nearest even, like F32ToBf16.
  const std::vector<float> x = {1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -(1.0f + 1.0f / 256)};
  const Isa isa = GetParam();
  for (size_t k = 0; k < x.size(); ++k) {
    const bf16 one = F32ToBf16(1.0f);
    float y = 0;
    MatMul(&x[k], 1, 1, Bf16Matrix(&one, 1, 1), &y, 1, ctx);
    EXPECT_EQ(y, RoundToBf16(x[k])) << IsaName(isa);
  }
}

TEST_P(MatMulEveryIsa, MatchesReferenceOnOddShapes) {
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  std::mt19937 rng(7);
  const size_t ms[] = {1, 2, 3, 7, 17, 64, 100};
  const size_t shapes[][2] = {{1, 1},    {3, 15},    {15, 17},  {17, 31}, {31, 33},
                              {33, 100}, {100, 257}, {257, 64}, {70, 3}};
  for (DType dtype : {DType::kBF16, DType::kF32})
    for (size_t m : ms)
      for (const auto& s : shapes) {
        const size_t rows = s[0], cols = s[1];
        // Padded strides everywhere: row_stride > cols, ldx > cols, ldy > rows.
        const Case c{m, rows, cols, cols + 5, cols + 3, rows + 2};
        CheckAgainstReference(c, dtype, /*accumulate=*/(m + rows) % 2 == 0, ctx, rng);
        if (HasFatalFailure()) return;
      }
}

TEST_P(MatMulEveryIsa, AccumulateAndDenseStrides) {
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  std::mt19937 rng(11);
  for (bool acc : {false, true})
    for (size_t m : {1, 5, 12, 13, 24}) {
      CheckAgainstReference({m, 96, 64, 64, 64, 96}, DType::kBF16, acc, ctx, rng);
      CheckAgainstReference({m, 40, 130, 130, 130, 40}, DType::kBF16, acc, ctx, rng);
      if (HasFatalFailure()) return;
    }
}

// Few tokens over long rows: the AVX-512 bf16 GEMV walks 2..7 tokens in column chunks of 1024
// and row blocks of 8 (one chunk, several, a partial last one; row counts not a multiple of 8).
TEST_P(MatMulEveryIsa, FewTokensLongRows) {
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  std::mt19937 rng(12);
  for (size_t m : {1, 2, 3, 4, 5, 6, 7})
    for (size_t cols : {1536, 3072, 3001}) {
      CheckAgainstReference({m, 70, cols, cols + 7, cols, 75}, DType::kBF16, m % 2 == 0, ctx, rng);
      if (HasFatalFailure()) return;
    }
}

// f32 weights (the MoE router): a token's logits are the same bits whether it goes alone (decode)
// or among others (prefill tiles of several tokens), so routing does not depend on the batch.
TEST_P(MatMulEveryIsa, F32TokensTogetherEqualTokensAlone) {
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  std::mt19937 rng(13);
  for (size_t m : {2, 4, 5, 9, 33})
    for (auto [rows, cols] : {std::pair<size_t, size_t>{256, 3072}, {13, 70}, {7, 301}}) {
      const std::vector<float> wf = RandomF32(rows * cols, rng);
      const WeightMatrix w{DType::kF32, wf.data(), rows, cols, cols};
      ExpectTokensTogetherEqualAlone(
          RandomF32(m * cols, rng), m, w, ctx,
          IsaName(GetParam()) + " " + std::to_string(rows) + "x" + std::to_string(cols));
      if (HasFatalFailure()) return;
    }
}

TEST(MatMul, SingleThreadPoolAndEmptyInputs) {
  ThreadPool pool(1);
  KernelContext ctx(pool);
  std::mt19937 rng(3);
  CheckAgainstReference({9, 33, 65, 70, 65, 33}, DType::kBF16, false, ctx, rng);
  // m = 0 and rows = 0 touch nothing.
  float y = 42;
  const bf16 w = F32ToBf16(1);
  MatMul(nullptr, 1, 0, Bf16Matrix(&w, 1, 1), &y, 1, ctx);
  EXPECT_EQ(y, 42);
}

}  // namespace
}  // namespace moeserve::kernels
