// The kernel context (kernels/context.h): the ISA is its own, not the process's, and its scratch
// is its own and stops growing once the largest call has run.
#include "kernels/context.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "core/check.h"
#include "kernels/attention.h"
#include "kernels/isa_kernels.h"
#include "kernels/matmul.h"
#include "kernels/moe.h"
#include "test_util.h"

namespace moeserve::kernels {
namespace {

using testing::RandomBf16;
using testing::RandomF32;

TEST(KernelContext, RefusesAnIsaTheMachineLacksAndKeepsTheOneItWasGiven) {
  ThreadPool pool(2);
  if (MachineIsa() < Isa::kAvx512Bf16) {
    EXPECT_THROW(KernelContext(pool, Isa::kAvx512Bf16), Error);
  }
  if (MachineIsa() < Isa::kAmx) {
    EXPECT_THROW(KernelContext(pool, Isa::kAmx), Error);
  }
  // A context's ISA is fixed when it is made: a later cap of the process does not move it.
  KernelContext scalar(pool, Isa::kScalar);
  KernelContext best(pool, MachineIsa());
  ScopedIsaCap cap(Isa::kScalar);
  EXPECT_EQ(scalar.isa(), Isa::kScalar);
  EXPECT_EQ(best.isa(), MachineIsa());
  EXPECT_EQ(best.kernels().isa, KernelsFor(MachineIsa()).isa);
}

// One step's kernels (the attention projections, attention, the experts) as a model layer runs
// them, on a bf16 model of odd sizes.
struct Layer {
  static constexpr size_t kHidden = 96, kInter = 40, kExperts = 6, kTopK = 2, kHeads = 4,
                          kKvHeads = 2, kHeadDim = 24, kBlock = 16;
  std::vector<bf16> wq, w1, w3, w2;
  std::vector<ExpertWeights> experts;
  std::vector<bf16> kv;  // the cache: one sequence's blocks, K then V
  std::vector<const bf16*> k_blocks, v_blocks;

  explicit Layer(std::mt19937& rng)
      : wq(RandomBf16(kHeads * kHeadDim * kHidden, rng)),
        w1(RandomBf16(kExperts * kInter * kHidden, rng)),
        w3(RandomBf16(kExperts * kInter * kHidden, rng)),
        w2(RandomBf16(kExperts * kHidden * kInter, rng)) {
    for (size_t e = 0; e < kExperts; ++e)
      experts.push_back({Bf16Matrix(w1.data() + e * kInter * kHidden, kInter, kHidden),
                         Bf16Matrix(w3.data() + e * kInter * kHidden, kInter, kHidden),
                         Bf16Matrix(w2.data() + e * kHidden * kInter, kHidden, kInter)});
  }

  // y [tokens, kHidden] for `tokens` tokens of one sequence at positions 0.. (its K/V random).
  std::vector<float> Run(KernelContext& ctx, size_t tokens, std::mt19937& rng) {
    const size_t qw = kHeads * kHeadDim, blocks = (tokens + kBlock - 1) / kBlock;
    const size_t block_elems = kBlock * kKvHeads * kHeadDim;
    kv = RandomBf16(2 * blocks * block_elems, rng);
    k_blocks.clear(), v_blocks.clear();
    for (size_t b = 0; b < blocks; ++b) {
      k_blocks.push_back(kv.data() + b * block_elems);
      v_blocks.push_back(kv.data() + (blocks + b) * block_elems);
    }
    const std::vector<float> x = RandomF32(tokens * kHidden, rng);
    std::vector<float> q(tokens * qw), attn(tokens * qw), y(tokens * kHidden);
    MatMul(x.data(), kHidden, tokens, Bf16Matrix(wq.data(), qw, kHidden), q.data(), qw, ctx);
    const AttentionSeq seq{0, tokens, tokens, k_blocks.data(), v_blocks.data()};
    Attention(q.data(), qw, {&seq, 1}, {kHeads, kKvHeads, kHeadDim, kBlock, 0.2f}, attn.data(), qw,
              ctx);
    std::vector<int32_t> idx(tokens * kTopK);
    std::vector<float> weights(tokens * kTopK, 0.5f);
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(rng() % kExperts);
    for (size_t t = 0; t < tokens; ++t)
      if (idx[t * kTopK] == idx[t * kTopK + 1])
        idx[t * kTopK + 1] = (idx[t * kTopK] + 1) % kExperts;
    MoeExperts(attn.data(), qw, tokens, idx.data(), weights.data(), kTopK, experts, y.data(),
               kHidden, ctx);
    return y;
  }
};

// Per buffer, the most any thread of the context holds: which thread runs which piece of a call
// can change from call to call (attention's items are handed out dynamically), not how much a
// piece needs.
std::vector<size_t> LargestPerBuffer(KernelContext& ctx, size_t threads) {
  std::vector<size_t> most(6, 0);
  for (size_t t = 0; t < threads; ++t) {
    const WorkerScratch& w = ctx.worker(t);
    const size_t sizes[6] = {w.pack.capacity(),       w.panel.capacity(), w.xpack.capacity(),
                             w.fp8_scales.capacity(), w.x_row.capacity(), w.attention.capacity()};
    for (size_t i = 0; i < 6; ++i) most[i] = std::max(most[i], sizes[i]);
  }
  most.push_back(ctx.call().bytes());
  return most;
}

TEST(KernelContext, ScratchStopsGrowingAfterTheLargestCallAndContextsShareNothing) {
  std::mt19937 rng(3);
  Layer layer(rng);
  ThreadPool pool(2);
  KernelContext a(pool), b(pool);
  EXPECT_EQ(a.scratch_bytes(), 0u);
  // The largest call first (~100 rows per expert), then the same call again and smaller ones
  // (whose experts get fewer rows): no buffer grows past what the largest call needed of it.
  std::mt19937 rng_a(9);
  const std::mt19937 largest = rng_a;
  layer.Run(a, 300, rng_a);
  const std::vector<size_t> after_largest = LargestPerBuffer(a, 2);
  EXPECT_GT(a.scratch_bytes(), 0u);
  EXPECT_EQ(b.scratch_bytes(), 0u) << "a's calls grew b's scratch";
  std::mt19937 again = largest;
  layer.Run(a, 300, again);
  EXPECT_EQ(LargestPerBuffer(a, 2), after_largest) << "the same call again";
  for (size_t tokens : {1, 7, 64, 2, 30}) {
    layer.Run(a, tokens, rng_a);
    ASSERT_EQ(LargestPerBuffer(a, 2), after_largest) << tokens << " tokens";
  }
  // b, with its own (empty) scratch, computes the same bits from the same inputs.
  std::mt19937 rng_a2(11), rng_b2(11);
  const std::vector<float> ya = layer.Run(a, 33, rng_a2), yb = layer.Run(b, 33, rng_b2);
  ASSERT_EQ(std::memcmp(ya.data(), yb.data(), ya.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace moeserve::kernels
