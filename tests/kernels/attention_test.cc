#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "runtime/thread_pool.h"
#include "test_util.h"

namespace moeserve::kernels {
namespace {

using testing::RandomF32;

MOESERVE_EVERY_ISA_SUITE(AttentionEveryIsa);

// A paged cache: blocks handed out in a shuffled order so that block tables are not identity.
struct Cache {
  size_t block_elems;
  std::vector<std::vector<bf16>> k, v;                       // per block
  std::vector<std::vector<const bf16*>> k_tables, v_tables;  // per sequence
};

std::vector<AttentionSeq> MakeSeqs(const AttentionShape& s, const std::vector<size_t>& q_lens,
                                   const std::vector<size_t>& kv_lens, Cache& cache,
                                   std::mt19937& rng, size_t* total_q) {
  cache.block_elems = s.block_size * s.num_kv_heads * s.head_dim;
  size_t blocks = 0;
  for (size_t kv : kv_lens) blocks += (kv + s.block_size - 1) / s.block_size;
  std::vector<size_t> order(blocks);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  for (size_t b = 0; b < blocks; ++b) {
    cache.k.push_back(testing::RandomBf16(cache.block_elems, rng));
    cache.v.push_back(testing::RandomBf16(cache.block_elems, rng));
  }
  std::vector<AttentionSeq> seqs;
  size_t next = 0, q_begin = 0;
  cache.k_tables.resize(q_lens.size());
  cache.v_tables.resize(q_lens.size());
  for (size_t i = 0; i < q_lens.size(); ++i) {
    for (size_t p = 0; p < kv_lens[i]; p += s.block_size) {
      cache.k_tables[i].push_back(cache.k[order[next]].data());
      cache.v_tables[i].push_back(cache.v[order[next]].data());
      ++next;
    }
    seqs.push_back(
        {q_begin, q_lens[i], kv_lens[i], cache.k_tables[i].data(), cache.v_tables[i].data()});
    q_begin += q_lens[i];
  }
  *total_q = q_begin;
  return seqs;
}

TEST(AttentionReference, SingleKeyReturnsValueAndZeroQueryAveragesCausally) {
  AttentionShape s{4, 2, 8, 4, 0.5f};
  std::mt19937 rng(1);
  Cache cache;
  size_t tq = 0;
  auto seqs = MakeSeqs(s, {3}, {6}, cache, rng, &tq);
  const size_t ld = s.num_heads * s.head_dim;
  std::vector<float> q(tq * ld, 0.0f), out(tq * ld);
  AttentionReference(q.data(), ld, seqs, s, out.data(), ld);
  // q = 0: every visible key scores 0, so query i (position 3 + i) averages V rows 0..3+i.
  for (size_t i = 0; i < 3; ++i)
    for (size_t h = 0; h < 4; ++h)
      for (size_t d = 0; d < 8; ++d) {
        double mean = 0;
        for (size_t p = 0; p <= 3 + i; ++p)
          mean += Bf16ToF32(seqs[0].v_blocks[p / 4][(p % 4) * 16 + (h / 2) * 8 + d]);
        mean /= 4 + i;
        EXPECT_NEAR(out[i * ld + h * 8 + d], mean, 1e-6) << i << " " << h << " " << d;
      }
  // A single visible key: the output is its V row whatever q is.
  Cache c1;
  auto one = MakeSeqs(s, {1}, {1}, c1, rng, &tq);
  q = RandomF32(ld, rng);
  AttentionReference(q.data(), ld, one, s, out.data(), ld);
  for (size_t h = 0; h < 4; ++h)
    for (size_t d = 0; d < 8; ++d)
      EXPECT_EQ(out[h * 8 + d], Bf16ToF32(one[0].v_blocks[0][(h / 2) * 8 + d]));
}

void CheckAttention(const AttentionShape& s, const std::vector<size_t>& q_lens,
                    const std::vector<size_t>& kv_lens, KernelContext& ctx, std::mt19937& rng,
                    float q_range = 2) {
  Cache cache;
  size_t tq = 0;
  auto seqs = MakeSeqs(s, q_lens, kv_lens, cache, rng, &tq);
  const size_t width = s.num_heads * s.head_dim, ldq = width + 3, ldo = width + 5;
  const std::vector<float> q = RandomF32(tq * ldq, rng, -q_range, q_range);
  std::vector<float> ref(tq * ldo, -7.0f), got(tq * ldo, -7.0f);
  AttentionReference(q.data(), ldq, seqs, s, ref.data(), ldo);
  Attention(q.data(), ldq, seqs, s, got.data(), ldo, ctx);
  for (size_t i = 0; i < tq * ldo; ++i)
    // Outputs are convex combinations of bf16 values in [-1, 1]; the two versions differ by f32
    // summation order over <= 100 keys and head_dim products, and the fast path's vector exp
    // (~1e-7 relative): 2e-5 absolute is > 20x that, far below a wrong key or mask (~1e-2).
    ASSERT_NEAR(got[i], ref[i], 2e-5f)
        << "at " << i / ldo << "," << i % ldo << " " << IsaName(ctx.isa()) << " heads "
        << s.num_heads << "/" << s.num_kv_heads << " head_dim " << s.head_dim << " block "
        << s.block_size;
}

TEST_P(AttentionEveryIsa, MatchesReference) {
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  std::mt19937 rng(3);
  // Mixed batch: decode, full prefill, chunked prefill, an idle sequence (q_len = 0).
  CheckAttention({6, 2, 16, 4, 0.25f}, {1, 20, 5, 0}, {37, 20, 23, 9}, ctx, rng);
  // MiniMax-like head geometry (group 6, head_dim 128), odd block size.
  CheckAttention({12, 2, 128, 5, 1 / std::sqrt(128.0f)}, {1, 33}, {100, 40}, ctx, rng);
  // MHA (group 1), head_dim not a multiple of the vector width.
  CheckAttention({3, 3, 20, 16, 0.2f}, {17, 1}, {17, 18}, ctx, rng);
  if (HasFatalFailure()) return;
  // Decode items over several of the 8 kv heads (items of kv heads [h, h + n) at h > 0): on 2
  // threads a lone decode takes them in 4 items of 2 (all 8 in one item would leave a thread
  // idle), two decodes in 2 items of 4 each.
  CheckAttention({16, 8, 32, 16, 0.2f}, {1}, {40}, ctx, rng);
  if (HasFatalFailure()) return;
  CheckAttention({16, 8, 32, 16, 0.2f}, {1, 1}, {40, 75}, ctx, rng);
  if (HasFatalFailure()) return;
}

// The shapes the fast tile specialises on, and their edges: GQA groups 1..8 (score rows per pass:
// 8; P.V rows per pass: 4), head_dim below / at / between / above the 16-, 32- and 64-wide vector
// steps and above the fast tile's 256 limit, blocks smaller than, equal to and larger than its
// 16-key chunks, kv lengths that end mid-chunk and mid-block, and batches mixing decode, prefill
// chunks with context (query tiles of 16 straddling chunk ends), full prompts and idle sequences.
TEST_P(AttentionEveryIsa, MatchesReferenceOddShapes) {
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  std::mt19937 rng(5);
  for (size_t group = 1; group <= 8; ++group) {
    const size_t d = 8 + 24 * group;  // 32 .. 200: multiples of 16 and 8-element tails
    CheckAttention({2 * group, 2, d, 16, 1 / std::sqrt(float(d))}, {1, 21, 0}, {45, 30, 3}, ctx,
                   rng);
    if (HasFatalFailure()) return;
  }
  struct Case {
    size_t head_dim, block_size;
  };
  for (const Case c : {Case{1, 3}, Case{7, 1}, Case{16, 17}, Case{33, 32}, Case{64, 5},
                       Case{100, 16}, Case{130, 7}, Case{256, 16}, Case{300, 16}}) {
    CheckAttention({6, 2, c.head_dim, c.block_size, 1 / std::sqrt(float(c.head_dim))},
                   {1, 18, 37, 2, 0}, {70, 40, 37, 17, 5}, ctx, rng);
    if (HasFatalFailure()) return;
  }
  // Decode over head dims that are multiples of 32 (the avx512 tile's scores straight from the K
  // rows) for every group up to 8 (7 and 8 rows per kv head: two score passes), kv lengths that
  // end mid-chunk (the chunk's last row repeated past its keys), and a 2-query chunk (up to
  // group 4 at most 8 rows per kv head: the same tile, rows seeing different keys).
  for (size_t group = 1; group <= 8; ++group)
    for (const size_t d : {32, 64, 128}) {
      CheckAttention({2 * group, 2, d, 16, 1 / std::sqrt(float(d))}, {1, 1, 2}, {45, 16, 33}, ctx,
                     rng);
      if (HasFatalFailure()) return;
    }
  // Peaked softmax (large scores): the running max moves between chunks and most weights
  // underflow; masked lanes must stay out of the max and the sums.
  CheckAttention({8, 1, 32, 16, 0.5f}, {1, 24}, {60, 50}, ctx, rng, 6.0f);
  if (HasFatalFailure()) return;
}

// Prompts long enough for several 64-key chunks of the AMX tile (prefill items of 16 queries):
// full prompts, a chunked prefill whose later chunks skip its first row blocks, a decode beside
// them; blocks of 16 (K tiles read from the cache, rows past the end masked) and 7 (K gathered);
// GQA groups that leave the last row block partial; and peaked scores whose running max keeps
// moving from chunk to chunk (O rescaled between chunks).
TEST_P(AttentionEveryIsa, MatchesReferenceLongPrompts) {
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  std::mt19937 rng(9);
  for (const size_t block : {16, 7}) {
    CheckAttention({12, 2, 128, block, 1 / std::sqrt(128.0f)}, {150, 70, 1}, {150, 200, 90}, ctx,
                   rng);
    if (HasFatalFailure()) return;
  }
  CheckAttention({10, 2, 64, 16, 0.125f}, {37, 100}, {37, 165}, ctx, rng);
  if (HasFatalFailure()) return;
  CheckAttention({6, 1, 32, 16, 0.5f}, {140}, {200}, ctx, rng, 6.0f);
}

// Key-range splits of `seq` (AttentionKeySplits) for sequences of these lengths.
size_t KeySplits(const AttentionShape& s, const std::vector<size_t>& q_lens,
                 const std::vector<size_t>& kv_lens, size_t threads, size_t seq) {
  std::vector<AttentionSeq> seqs;
  for (size_t i = 0; i < q_lens.size(); ++i) seqs.push_back({0, q_lens[i], kv_lens[i]});
  return AttentionKeySplits(seqs, s, threads, seq);
}

// Long decodes split over key ranges and combined (flash decoding): a sequence alone with one kv
// head (a tp-8 rank's share of MiniMax-M2), on 2 and 4 threads (sizes kept small: the kernel
// tests also run under TSan in CI); a batch mixing a long decode, a
// 9-query chunk with a long context (split too on 4 threads: its rows end on different keys), a
// prefill and an idle sequence; peaked scores, whose max differs from range to range; blocks of
// 16 (the AMX tile reads K tiles from the cache) and 7. The splits are checked to happen.
TEST_P(AttentionEveryIsa, MatchesReferenceWithKeySplits) {
  std::mt19937 rng(11);
  for (const size_t threads : {2, 4}) {
    ThreadPool pool(threads);
    KernelContext ctx(pool, isa());
    for (const size_t block : {16, 7}) {
      const AttentionShape one{6, 1, 128, block, 1 / std::sqrt(128.0f)};
      ASSERT_EQ(KeySplits(one, {1}, {1600}, threads, 0), 3u);
      CheckAttention(one, {1}, {1600}, ctx, rng);
      if (HasFatalFailure()) return;
      const AttentionShape two{12, 2, 64, block, 0.125f};
      const std::vector<size_t> q_lens{1, 9, 20, 0}, kv_lens{1300, 1100, 20, 5};
      ASSERT_EQ(KeySplits(two, q_lens, kv_lens, threads, 0), 2u);
      ASSERT_EQ(KeySplits(two, q_lens, kv_lens, threads, 1), threads == 2 ? 1u : 2u);
      ASSERT_EQ(KeySplits(two, q_lens, kv_lens, threads, 2), 1u);
      CheckAttention(two, q_lens, kv_lens, ctx, rng);
      if (HasFatalFailure()) return;
      CheckAttention(two, q_lens, kv_lens, ctx, rng, 6.0f);
      if (HasFatalFailure()) return;
    }
  }
}

}  // namespace
}  // namespace moeserve::kernels
