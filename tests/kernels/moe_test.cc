#include "kernels/moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/activation.h"
#include "kernels/matmul.h"
#include "runtime/thread_pool.h"
#include "test_util.h"

namespace moeserve::kernels {
namespace {

using testing::RandomBf16;
using testing::RandomF32;

MOESERVE_EVERY_ISA_SUITE(MoeExpertsEveryIsa);

float Sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

TEST(RouteSigmoidTopK, PicksByBiasedScoreWeighsByUnbiased) {
  // 4 experts; the bias makes expert 3 win though its logit is lowest.
  const float logits[4] = {2.0f, 1.0f, 0.5f, -1.0f};
  const float bias[4] = {0.0f, 0.0f, 0.0f, 5.0f};
  int32_t idx[2];
  float w[2];
  RouteSigmoidTopK(logits, bias, 1, 4, 2, /*renormalize=*/false, 1.0f, idx, w);
  EXPECT_EQ(idx[0], 3);
  EXPECT_EQ(idx[1], 0);
  EXPECT_FLOAT_EQ(w[0], Sigmoid(-1.0f));
  EXPECT_FLOAT_EQ(w[1], Sigmoid(2.0f));
  RouteSigmoidTopK(logits, bias, 1, 4, 2, /*renormalize=*/true, 2.5f, idx, w);
  const float sum = Sigmoid(-1.0f) + Sigmoid(2.0f);
  EXPECT_FLOAT_EQ(w[0], Sigmoid(-1.0f) / sum * 2.5f);
  EXPECT_FLOAT_EQ(w[1], Sigmoid(2.0f) / sum * 2.5f);
  // No bias: plain order of the logits.
  RouteSigmoidTopK(logits, nullptr, 1, 4, 1, true, 1.0f, idx, w);
  EXPECT_EQ(idx[0], 0);
  EXPECT_FLOAT_EQ(w[0], 1.0f);  // top_k = 1 renormalised is exactly 1
}

TEST(RouteSigmoidTopK, TiesGoToLowerIndexAndTopKAll) {
  const float logits[6] = {0.5f, 1.0f, 1.0f, 0.5f, 1.0f, 0.0f};
  int32_t idx[6];
  float w[6];
  RouteSigmoidTopK(logits, nullptr, 1, 6, 2, false, 1.0f, idx, w);
  EXPECT_EQ(idx[0], 1);
  EXPECT_EQ(idx[1], 2);
  // top_k = num_experts: a full, stable descending order.
  RouteSigmoidTopK(logits, nullptr, 1, 6, 6, true, 1.0f, idx, w);
  const int32_t want[6] = {1, 2, 4, 0, 3, 5};
  float total = 0;
  for (int j = 0; j < 6; ++j) {
    EXPECT_EQ(idx[j], want[j]) << j;
    total += w[j];
  }
  EXPECT_NEAR(total, 1.0f, 1e-6f);
}

TEST(RouteSoftmaxTopK, MatchesDefinition) {
  const float logits[2 * 5] = {1, 3, 3, 0, -2, /**/ 0, 0, 0, 0, 0};
  int32_t idx[2 * 3];
  float w[2 * 3];
  RouteSoftmaxTopK(logits, 2, 5, 3, /*norm_topk_prob=*/false, idx, w);
  double z = 0;
  for (int e = 0; e < 5; ++e) z += std::exp(double{logits[e]});
  EXPECT_EQ(idx[0], 1);
  EXPECT_EQ(idx[1], 2);
  EXPECT_EQ(idx[2], 0);
  EXPECT_NEAR(w[0], std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(w[2], std::exp(1.0) / z, 1e-6);
  // All equal: ties → 0, 1, 2, each 1/5.
  EXPECT_EQ(idx[3], 0);
  EXPECT_EQ(idx[4], 1);
  EXPECT_EQ(idx[5], 2);
  EXPECT_FLOAT_EQ(w[3], 0.2f);
  RouteSoftmaxTopK(logits, 2, 5, 3, /*norm_topk_prob=*/true, idx, w);
  EXPECT_NEAR(w[0] + w[1] + w[2], 1.0f, 1e-6f);
  EXPECT_NEAR(w[3], 1.0f / 3, 1e-6f);
}

struct Experts {
  std::vector<std::vector<bf16>> storage;
  std::vector<ExpertWeights> list;
};

// num_experts experts of [inter, hidden] / [hidden, inter]; those in `absent` have no weights.
Experts MakeExperts(size_t num_experts, size_t hidden, size_t inter, std::mt19937& rng,
                    const std::vector<size_t>& absent = {}) {
  Experts ex;
  ex.storage.reserve(3 * num_experts);
  for (size_t e = 0; e < num_experts; ++e) {
    ExpertWeights w;
    if (std::find(absent.begin(), absent.end(), e) == absent.end()) {
      // w1 rows padded (row_stride > cols) as a TP shard view would be.
      ex.storage.push_back(RandomBf16(inter * (hidden + 3), rng, -0.2f, 0.2f));
      w.w1 = {DType::kBF16, ex.storage.back().data(), inter, hidden, hidden + 3};
      ex.storage.push_back(RandomBf16(inter * hidden, rng, -0.2f, 0.2f));
      w.w3 = Bf16Matrix(ex.storage.back().data(), inter, hidden);
      ex.storage.push_back(RandomBf16(hidden * inter, rng, -0.2f, 0.2f));
      w.w2 = Bf16Matrix(ex.storage.back().data(), hidden, inter);
    }
    ex.list.push_back(w);
  }
  return ex;
}

TEST(MoeExpertsReference, MatchesComposedDefinition) {
  std::mt19937 rng(5);
  const size_t hidden = 19, inter = 11;
  Experts ex = MakeExperts(3, hidden, inter, rng, /*absent=*/{1});
  const std::vector<float> x = RandomF32(hidden, rng);
  const int32_t idx[3] = {2, 1, 0};
  const float wts[3] = {0.5f, 7.0f, 0.25f};
  std::vector<float> y(hidden, 1.0f);
  MoeExpertsReference(x.data(), hidden, 1, idx, wts, 3, ex.list, y.data(), hidden,
                      /*accumulate=*/true);
  // By hand: expert 1 is absent (skipped), the others composed from MatMul/SiluMul references.
  std::vector<float> want(hidden, 0.0f);
  for (int j : {0, 2}) {
    const ExpertWeights& w = ex.list[idx[j]];
    std::vector<float> g(inter), u(inter), a(inter), o(hidden);
    MatMulReference(x.data(), hidden, 1, w.w1, g.data(), inter);
    MatMulReference(x.data(), hidden, 1, w.w3, u.data(), inter);
    for (size_t i = 0; i < inter; ++i) a[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
    MatMulReference(a.data(), inter, 1, w.w2, o.data(), hidden);
    for (size_t i = 0; i < hidden; ++i) want[i] += wts[j] * o[i];
  }
  for (size_t i = 0; i < hidden; ++i) EXPECT_NEAR(y[i], 1.0f + want[i], 1e-5f) << i;
}

void CheckMoe(size_t num_tokens, size_t num_experts, size_t k, size_t hidden, size_t inter,
              bool accumulate, const std::vector<size_t>& absent, KernelContext& ctx,
              std::mt19937& rng) {
  Experts ex = MakeExperts(num_experts, hidden, inter, rng, absent);
  const size_t ldx = hidden + 2, ldy = hidden + 1;
  const std::vector<float> x = RandomF32(num_tokens * ldx, rng);
  const std::vector<float> logits = RandomF32(num_tokens * num_experts, rng, -3, 3);
  std::vector<int32_t> idx(num_tokens * k);
  std::vector<float> wts(num_tokens * k);
  RouteSigmoidTopK(logits.data(), nullptr, num_tokens, num_experts, k, true, 1.0f, idx.data(),
                   wts.data());
  const std::vector<float> y0 = RandomF32(num_tokens * ldy, rng);
  std::vector<float> ref = y0, got = y0;
  MoeExpertsReference(x.data(), ldx, num_tokens, idx.data(), wts.data(), k, ex.list, ref.data(),
                      ldy, accumulate);
  MoeExperts(x.data(), ldx, num_tokens, idx.data(), wts.data(), k, ex.list, got.data(), ldy, ctx,
             accumulate);
  for (size_t t = 0; t < num_tokens; ++t)
    for (size_t i = 0; i < ldy; ++i) {
      const size_t at = t * ldy + i;
      if (i >= hidden) {
        ASSERT_EQ(got[at], y0[at]);
        continue;
      }
      // Three chained f32 sums (gate/up over hidden, down over inter) in different orders, and
      // silu through a vector exp (relative error ~1e-7); values are O(0.1), so an absolute 2e-5
      // is ~100x the expected difference and far below any indexing mistake (O(0.01+)).
      ASSERT_NEAR(got[at], ref[at], 2e-5f + 1e-6f * std::fabs(ref[at]))
          << "T=" << num_tokens << " k=" << k << " t=" << t << " i=" << i << " "
          << IsaName(ctx.isa());
    }
}

TEST_P(MoeExpertsEveryIsa, MatchesReference) {
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  std::mt19937 rng(9);
  // Decode (one token, top-8 of 32), small prefill, many tokens (GEMM path per expert).
  CheckMoe(1, 32, 8, 67, 33, false, {}, ctx, rng);
  CheckMoe(3, 8, 2, 40, 17, true, {5}, ctx, rng);
  CheckMoe(37, 6, 2, 33, 48, false, {0, 4}, ctx, rng);
  CheckMoe(64, 4, 4, 31, 15, true, {}, ctx, rng);   // top_k = num_experts
  CheckMoe(17, 5, 1, 16, 64, false, {}, ctx, rng);  // top_k = 1
  if (HasFatalFailure()) return;
}

// A tensor-parallel rank can hold no intermediate columns of the experts (MXFP4 experts split on
// 32-column groups: an intermediate of 96 over 4 ranks leaves one rank none): w1 / w3 of 0 rows and
// w2 of 0 columns, mapped (not absent). Their contribution is zero at every token count (the GEMM
// kernels from kGemmMinM rows were handed k = 0 and left the down projection unwritten: NaN logits
// at tp 4 / 8 on AVX2 and AVX-512).
TEST_P(MoeExpertsEveryIsa, ZeroIntermediateSliceAddsNothing) {
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  std::mt19937 rng(12);
  const size_t hidden = 40, num_experts = 4, k = 2;
  std::vector<bf16> storage(1);  // any mapped address: the views have no elements
  std::vector<ExpertWeights> experts(num_experts);
  for (ExpertWeights& e : experts) {
    e.w1 = {DType::kBF16, storage.data(), 0, hidden, hidden};
    e.w3 = {DType::kBF16, storage.data(), 0, hidden, hidden};
    e.w2 = {DType::kBF16, storage.data(), hidden, 0, 1};
  }
  for (size_t tokens : {1, 5, 37}) {
    const std::vector<float> x = RandomF32(tokens * hidden, rng);
    std::vector<int32_t> idx(tokens * k);
    std::vector<float> wts(tokens * k, 0.5f);
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i % num_experts);
    for (bool accumulate : {true, false}) {
      std::vector<float> y(tokens * hidden, 3.0f);
      MoeExperts(x.data(), hidden, tokens, idx.data(), wts.data(), k, experts, y.data(), hidden,
                 ctx, accumulate);
      for (float v : y)
        ASSERT_EQ(v, accumulate ? 3.0f : 0.0f)
            << tokens << " tokens, accumulate " << accumulate << ", " << IsaName(ctx.isa());
    }
  }
}

TEST(MoeExperts, AllRoutedExpertsAbsentGivesZeroOrKeepsY) {
  ThreadPool pool(2);
  KernelContext ctx(pool);
  std::mt19937 rng(2);
  Experts ex = MakeExperts(4, 8, 4, rng, {0, 1});
  const std::vector<float> x = RandomF32(8, rng);
  const int32_t idx[2] = {0, 1};
  const float wts[2] = {0.5f, 0.5f};
  std::vector<float> y(8, 3.0f);
  MoeExperts(x.data(), 8, 1, idx, wts, 2, ex.list, y.data(), 8, ctx, /*accumulate=*/true);
  for (float v : y) EXPECT_EQ(v, 3.0f);
  MoeExperts(x.data(), 8, 1, idx, wts, 2, ex.list, y.data(), 8, ctx, /*accumulate=*/false);
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace moeserve::kernels
