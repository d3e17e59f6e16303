// FP8 (e4m3, per token and kv head scale) KV cache: row quantizer, block layout, and Attention
// over it on every ISA path against AttentionReference; plus the accuracy cost against bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/quant.h"
#include "runtime/thread_pool.h"
#include "test_util.h"

namespace moeserve::kernels {
namespace {

using testing::RandomF32;

MOESERVE_EVERY_ISA_SUITE(AttentionFp8EveryIsa);

TEST(KvFp8, BlockLayoutAndRowQuantizer) {
  EXPECT_EQ(KvBlockBytesFp8(16, 8, 128), 16u * 8 * (128 + 4));  // 132 bytes per token and head
  EXPECT_EQ(KvScaleOffsetFp8(3, 1, 5), 16u);                    // 15 code bytes padded to 16
  EXPECT_EQ(KvBlockBytesFp8(3, 1, 5), 16u + 12);
  const size_t heads = 3, d = 10, bs = 4;
  std::mt19937 rng(2);
  std::vector<float> x = RandomF32(heads * d, rng, -3, 3);
  std::fill(x.begin() + d, x.begin() + 2 * d, 0.0f);  // head 1 all zero → scale 1, codes 0
  x[2 * d + 4] = 7.0f;                                // head 2 amax 7 → code 0x7e (448)
  std::vector<uint8_t> block(KvBlockBytesFp8(bs, heads, d), 0xaa);
  WriteKvRowFp8(x.data(), heads, d, bs, 2, block.data());
  float scales[3];
  std::memcpy(scales, block.data() + KvScaleOffsetFp8(bs, heads, d) + 2 * heads * 4, 12);
  EXPECT_EQ(scales[1], 1.0f);
  EXPECT_EQ(scales[2], 7.0f / 448.0f);
  const uint8_t* codes = block.data() + 2 * heads * d;
  EXPECT_EQ(codes[2 * d + 4], 0x7e);
  for (size_t g = 0; g < heads; ++g) {
    float amax = 0;
    for (size_t j = 0; j < d; ++j) amax = std::max(amax, std::fabs(x[g * d + j]));
    if (g != 1) {
      EXPECT_EQ(scales[g], amax / 448.0f);
    }
    for (size_t j = 0; j < d; ++j) {
      EXPECT_EQ(codes[g * d + j], FloatToE4M3(x[g * d + j] / scales[g]));
      // Half an e4m3 step: 2^-4 relative, or the subnormal step 2^-10 · scale near zero.
      EXPECT_LE(std::fabs(E4M3ToFloat(codes[g * d + j]) * scales[g] - x[g * d + j]),
                std::fabs(x[g * d + j]) / 16 + scales[g] / 1024);
    }
  }
  // Other rows untouched.
  EXPECT_EQ(block[0], 0xaa);
  EXPECT_EQ(block[3 * heads * d], 0xaa);
}

// The same random K/V written to an FP8 cache and a bf16 cache (shuffled block tables).
struct Caches {
  std::vector<std::vector<uint8_t>> k8, v8;
  std::vector<std::vector<bf16>> k16, v16;
  std::vector<std::vector<const uint8_t*>> k8t, v8t;
  std::vector<std::vector<const bf16*>> k16t, v16t;
  std::vector<AttentionSeq> fp8;
  std::vector<AttentionSeq> b16;
  size_t total_q = 0;
};

// k_mult scales every K value (and so the FP8 row scales) on top of the per-head magnitudes.
// log_uniform: K and V values ±2^-u, u uniform in [0, 20), each head's first ±4 (an outlier
// channel): a fifth of the codes come out e4m3 subnormal (|x| below 4 · 2^-6 / 448), with
// weights large enough that decoding them wrong moves the outputs past the tolerance (the default
// uniform values are never subnormal).
void Build(const AttentionShape& s, const std::vector<size_t>& q_lens,
           const std::vector<size_t>& kv_lens, std::mt19937& rng, Caches& c, float k_mult = 1,
           bool log_uniform = false) {
  const size_t hd = s.num_kv_heads * s.head_dim;
  size_t blocks = 0;
  for (size_t kv : kv_lens) blocks += (kv + s.block_size - 1) / s.block_size;
  std::vector<size_t> order(blocks);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  const size_t bytes = KvBlockBytesFp8(s.block_size, s.num_kv_heads, s.head_dim);
  c.k8.assign(blocks, std::vector<uint8_t>(bytes));
  c.v8.assign(blocks, std::vector<uint8_t>(bytes));
  c.k16.assign(blocks, std::vector<bf16>(s.block_size * hd));
  c.v16.assign(blocks, std::vector<bf16>(s.block_size * hd));
  for (size_t b = 0; b < blocks; ++b)
    for (size_t row = 0; row < s.block_size; ++row) {
      // Per-head magnitudes spread over 2^-3 .. 2^3, as real K/V (and what per-head scales buy).
      std::vector<float> k = RandomF32(hd, rng), v = RandomF32(hd, rng);
      if (log_uniform)
        for (auto* x : {&k, &v}) {
          for (float& e : *x) e = std::copysign(std::exp2(-10.0f * (e + 1.0f)), e);
          for (size_t g = 0; g < s.num_kv_heads; ++g)
            (*x)[g * s.head_dim] = std::copysign(4.0f, (*x)[g * s.head_dim]);
        }
      for (size_t g = 0; g < s.num_kv_heads; ++g) {
        const float mk = k_mult * std::ldexp(1.0f, static_cast<int>(rng() % 7) - 3);
        for (size_t j = 0; j < s.head_dim; ++j) k[g * s.head_dim + j] *= mk;
      }
      WriteKvRowFp8(k.data(), s.num_kv_heads, s.head_dim, s.block_size, row, c.k8[b].data());
      WriteKvRowFp8(v.data(), s.num_kv_heads, s.head_dim, s.block_size, row, c.v8[b].data());
      for (size_t i = 0; i < hd; ++i) {
        c.k16[b][row * hd + i] = F32ToBf16(k[i]);
        c.v16[b][row * hd + i] = F32ToBf16(v[i]);
      }
    }
  size_t next = 0, q_begin = 0;
  c.k8t.resize(q_lens.size()), c.v8t.resize(q_lens.size());
  c.k16t.resize(q_lens.size()), c.v16t.resize(q_lens.size());
  for (size_t i = 0; i < q_lens.size(); ++i) {
    for (size_t p = 0; p < kv_lens[i]; p += s.block_size, ++next) {
      c.k8t[i].push_back(c.k8[order[next]].data());
      c.v8t[i].push_back(c.v8[order[next]].data());
      c.k16t[i].push_back(c.k16[order[next]].data());
      c.v16t[i].push_back(c.v16[order[next]].data());
    }
    c.fp8.push_back(
        {q_begin, q_lens[i], kv_lens[i], nullptr, nullptr, c.k8t[i].data(), c.v8t[i].data()});
    c.b16.push_back({q_begin, q_lens[i], kv_lens[i], c.k16t[i].data(), c.v16t[i].data()});
    q_begin += q_lens[i];
  }
  c.total_q = q_begin;
}

// Codes of the caches' K and V rows that are e4m3 subnormal (exponent 0, mantissa not 0).
double SubnormalCodeShare(const AttentionShape& s, const Caches& c) {
  const size_t codes = s.block_size * s.num_kv_heads * s.head_dim;
  size_t sub = 0, all = 0;
  for (const auto* blocks : {&c.k8, &c.v8})
    for (const std::vector<uint8_t>& b : *blocks)
      for (size_t i = 0; i < codes; ++i, ++all) sub += (b[i] & 0x78) == 0 && (b[i] & 0x07) != 0;
  return static_cast<double>(sub) / static_cast<double>(all);
}

void CheckFp8(const AttentionShape& s, const std::vector<size_t>& q_lens,
              const std::vector<size_t>& kv_lens, KernelContext& ctx, std::mt19937& rng,
              float k_mult = 1, bool log_uniform = false) {
  Caches c;
  Build(s, q_lens, kv_lens, rng, c, k_mult, log_uniform);
  if (log_uniform) {
    EXPECT_GT(SubnormalCodeShare(s, c), 0.15);
  }
  const size_t width = s.num_heads * s.head_dim, ldq = width + 3, ldo = width + 5;
  const std::vector<float> q = RandomF32(c.total_q * ldq, rng, -1, 1);
  std::vector<float> ref(c.total_q * ldo, -7.0f), b16(c.total_q * ldo, -7.0f);
  AttentionReference(q.data(), ldq, c.fp8, s, ref.data(), ldo);
  AttentionReference(q.data(), ldq, c.b16, s, b16.data(), ldo);
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err2 += (ref[i] - b16[i]) * double(ref[i] - b16[i]);
    ref2 += double(b16[i]) * b16[i];
  }
  // Accuracy cost of e4m3 against bf16 (3 vs 8 mantissa bits): K and V elements carry up to
  // 2^-4 relative error (RMS ~2^-6); the output, a weighted mean of V, inherits about that:
  // relative RMS error below 2^-4 (measured ~1.5e-2 here).
  EXPECT_LT(std::sqrt(err2 / ref2), 1.0 / 16);
  const Isa isa = ctx.isa();  // the test's ISA
  std::vector<float> got(c.total_q * ldo, -7.0f);
  Attention(q.data(), ldq, c.fp8, s, got.data(), ldo, ctx);
  for (size_t i = 0; i < got.size(); ++i)
    // As the bf16 test: K/V dequantize to the same f32 values in every path (one f32 product
    // each); what differs is f32 summation order and the vector exp. |V| <= 1, so outputs are
    // O(1) and 2e-5 absolute is > 20x that, far below a wrong key, scale or mask.
    ASSERT_NEAR(got[i], ref[i], 2e-5f)
        << "at " << i / ldo << "," << i % ldo << " " << IsaName(isa) << " heads " << s.num_heads
        << "/" << s.num_kv_heads << " head_dim " << s.head_dim << " block " << s.block_size;
}

TEST_P(AttentionFp8EveryIsa, MatchesReference) {
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  std::mt19937 rng(4);
  CheckFp8({6, 2, 16, 4, 0.25f}, {1, 20, 5, 0}, {37, 20, 23, 9}, ctx, rng);
  CheckFp8({12, 2, 128, 5, 1 / std::sqrt(128.0f)}, {1, 33}, {100, 40}, ctx, rng);
  CheckFp8({3, 3, 20, 16, 0.2f}, {17, 1}, {17, 18}, ctx, rng);  // head_dim 20: vector tails
}

// Subnormal e4m3 codes (every tile's decode handles them exactly: the vector tiles through fp16
// bits, which a multiply by 2^120 of an f32 subnormal would also get right, but ~30x slower on
// Intel cores), on decode items (the fast tile on amx too) and prefill items (amx: its tiles).
TEST_P(AttentionFp8EveryIsa, MatchesReferenceWithSubnormalCodes) {
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  std::mt19937 rng(12);
  CheckFp8({12, 2, 128, 16, 1 / std::sqrt(128.0f)}, {1, 40}, {150, 70}, ctx, rng, 1, true);
  CheckFp8({6, 2, 20, 5, 0.2f}, {1, 9}, {33, 19}, ctx, rng, 1, true);  // head_dim 20: tails
  // Group 8 x 2 queries: one 16-row block over an FP8 cache (amx: the single-block walk, which
  // gathers chunk c + 1's keys and scales while chunk c's softmax still reads its own).
  CheckFp8({16, 2, 128, 16, 1 / std::sqrt(128.0f)}, {2}, {300}, ctx, rng, 1, true);
}

// One entry point serves both caches: a call whose sequences mix the formats, or a sequence with
// both pairs of tables or only one table of a pair, fails the call's check (a caller's bug, as
// q_len > kv_len) instead of being read as the wrong format.
TEST(AttentionCacheFormatDeathTest, MixedOrIncompleteTablesAreRefused) {
  ThreadPool pool(1);
  KernelContext ctx(pool);
  std::mt19937 rng(8);
  const AttentionShape s{4, 2, 16, 4, 0.25f};
  Caches c;
  Build(s, {3, 2}, {9, 6}, rng, c, 1);
  const size_t width = s.num_heads * s.head_dim;
  std::vector<float> q(c.total_q * width, 0.1f), out(c.total_q * width);
  auto run = [&](std::vector<AttentionSeq> seqs) {
    Attention(q.data(), width, seqs, s, out.data(), width, ctx);
  };
  EXPECT_NO_THROW(run(c.fp8));
  EXPECT_NO_THROW(run(c.b16));
  EXPECT_DEATH(run({c.b16[0], c.fp8[1]}), "one cache format");
  EXPECT_DEATH(run({c.fp8[0], c.b16[1]}), "one cache format");
  AttentionSeq both = c.fp8[0];
  both.k_blocks = c.b16[0].k_blocks, both.v_blocks = c.b16[0].v_blocks;
  EXPECT_DEATH(run({both}), "one cache format");
  AttentionSeq half = c.b16[0];
  half.v_blocks = nullptr;
  EXPECT_DEATH(run({half}), "one cache format");
}

// The fast tile decodes 64 codes per transposed dword row: head_dim around and between multiples
// of 64, GQA groups 1..8, blocks shorter and longer than its 16-key chunks, ragged kv ends; and K
// scales >= 2^8 (amax > 114688), where scale · 2^120 overflows and the dequantization must take
// its two-multiply path. The amx tile decodes rows 64 codes at a time and then a 32-code tail
// (head_dim 96, 160).
TEST_P(AttentionFp8EveryIsa, MatchesReferenceOddShapes) {
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  std::mt19937 rng(6);
  for (size_t group = 1; group <= 8; ++group) {
    const size_t d = 12 + 20 * group;  // 32 .. 172
    CheckFp8({2 * group, 2, d, 16, 1 / std::sqrt(float(d))}, {1, 21, 0}, {45, 30, 3}, ctx, rng);
    if (HasFatalFailure()) return;
  }
  struct Case {
    size_t head_dim, block_size;
  };
  for (const Case c : {Case{1, 3}, Case{7, 1}, Case{64, 17}, Case{70, 32}, Case{96, 16},
                       Case{128, 5}, Case{130, 16}, Case{160, 3}, Case{256, 7}, Case{300, 16}}) {
    CheckFp8({6, 2, c.head_dim, c.block_size, 1 / std::sqrt(float(c.head_dim))}, {1, 18, 37, 0},
             {70, 40, 37, 5}, ctx, rng);
    if (HasFatalFailure()) return;
  }
  CheckFp8({4, 2, 64, 16, 0x1p-20f / 8}, {1, 20}, {40, 20}, ctx, rng, 0x1p20f);
}

// Prompts long enough for several 64-key chunks of the AMX tile, as the bf16 test's: full and
// chunked prefills beside a decode, a partial last row block (FP8 K is always decoded into rows,
// whatever the block size).
TEST_P(AttentionFp8EveryIsa, MatchesReferenceLongPrompts) {
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  std::mt19937 rng(10);
  CheckFp8({6, 1, 128, 16, 1 / std::sqrt(128.0f)}, {100, 40, 1}, {100, 130, 70}, ctx, rng);
  if (HasFatalFailure()) return;
  CheckFp8({5, 1, 64, 7, 0.125f}, {37, 70}, {37, 135}, ctx, rng);
}

// Long decodes split over key ranges (attention_test.cc's MatchesReferenceWithKeySplits) on an
// FP8 cache: a lone one-kv-head decode and a mixed batch, 2 and 4 threads.
TEST_P(AttentionFp8EveryIsa, MatchesReferenceWithKeySplits) {
  std::mt19937 rng(12);
  for (const size_t threads : {2, 4}) {
    ThreadPool pool(threads);
    KernelContext ctx(pool, isa());
    const AttentionShape one{6, 1, 128, 16, 1 / std::sqrt(128.0f)};
    std::vector<AttentionSeq> lone{{0, 1, 1600}};
    ASSERT_GT(AttentionKeySplits(lone, one, threads, 0), 1u);
    CheckFp8(one, {1}, {1600}, ctx, rng);
    if (HasFatalFailure()) return;
    const AttentionShape two{12, 2, 64, 7, 0.125f};
    std::vector<AttentionSeq> mixed{{0, 1, 1300}, {1, 9, 1100}, {10, 20, 20}, {30, 0, 5}};
    ASSERT_GT(AttentionKeySplits(mixed, two, threads, 0), 1u);
    CheckFp8(two, {1, 9, 20, 0}, {1300, 1100, 20, 5}, ctx, rng);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace moeserve::kernels
