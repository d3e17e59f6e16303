#include "cache/block_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <vector>

namespace moeserve::cache {
namespace {

std::vector<int32_t> Range(int32_t begin, int32_t end) {
  std::vector<int32_t> v(end - begin);
  std::iota(v.begin(), v.end(), begin);
  return v;
}

// Allocates `tokens` whole, "computes" them and registers the full blocks.
size_t AllocateComputed(BlockManager& bm, SeqBlocks& seq, const std::vector<int32_t>& tokens) {
  const size_t cached = bm.Allocate(seq, tokens, tokens.size());
  bm.CacheComputedBlocks(seq, tokens, tokens.size());
  return cached;
}

TEST(BlockManager, AllocateGrowFree) {
  BlockManager bm(10, 4);
  EXPECT_EQ(bm.num_free_blocks(), 10u);
  SeqBlocks a;
  EXPECT_TRUE(bm.CanAllocate(Range(0, 10), 10));
  EXPECT_EQ(bm.Allocate(a, Range(0, 10), 10), 0u);
  EXPECT_EQ(a.table.size(), 3u);
  EXPECT_EQ(bm.num_used_blocks(), 3u);
  EXPECT_DOUBLE_EQ(bm.Usage(), 0.3);
  EXPECT_EQ(bm.NumBlocksToGrow(a, 12), 0u);
  EXPECT_EQ(bm.NumBlocksToGrow(a, 13), 1u);
  bm.Grow(a, 13);
  EXPECT_EQ(a.table.size(), 4u);
  EXPECT_FALSE(bm.CanGrow(a, 4 * 11));
  EXPECT_TRUE(bm.CanGrow(a, 4 * 10));
  bm.Free(a);
  EXPECT_TRUE(a.table.empty());
  EXPECT_EQ(bm.num_used_blocks(), 0u);
  EXPECT_EQ(bm.num_free_blocks(), 10u);
  bm.CheckInvariants();
}

TEST(BlockManager, PrefixHitsOnlyFullBlocksAndNeverTheWholePrompt) {
  BlockManager bm(20, 4);
  SeqBlocks a, b, c, d;
  const auto prompt = Range(100, 112);  // exactly 3 full blocks
  EXPECT_EQ(AllocateComputed(bm, a, prompt), 0u);
  EXPECT_EQ(bm.num_cached_blocks(), 3u);
  // Same prompt: the last token must be recomputed, so only 2 blocks are shared.
  EXPECT_EQ(bm.Allocate(b, prompt, prompt.size()), 8u);
  EXPECT_EQ(b.table[0], a.table[0]);
  EXPECT_EQ(b.table[1], a.table[1]);
  EXPECT_NE(b.table[2], a.table[2]);
  EXPECT_EQ(bm.ref_count(a.table[0]), 2);
  EXPECT_EQ(bm.ref_count(a.table[2]), 1);
  // A longer prompt with the same start shares all three.
  auto longer = prompt;
  longer.push_back(7);
  EXPECT_EQ(bm.Allocate(c, longer, longer.size()), 12u);
  // A prompt differing in block 1 shares only block 0.
  auto diverged = prompt;
  diverged[5] = -3;
  EXPECT_EQ(bm.Allocate(d, diverged, diverged.size()), 4u);
  EXPECT_EQ(bm.stats().hit_tokens, 8u + 12u + 4u);
  EXPECT_EQ(bm.stats().queried_tokens, 12u * 3 + 13u);
  bm.CheckInvariants();

  // A partial block is never registered.
  SeqBlocks e;
  AllocateComputed(bm, e, Range(500, 510));
  SeqBlocks f;
  EXPECT_EQ(bm.Allocate(f, Range(500, 520), 20), 8u);
  for (SeqBlocks* s : {&a, &b, &c, &d, &e, &f}) bm.Free(*s);
  EXPECT_EQ(bm.num_used_blocks(), 0u);
  bm.CheckInvariants();
}

TEST(BlockManager, NoPrefixCachingMeansNoSharing) {
  BlockManager bm(20, 4, /*prefix_caching=*/false);
  SeqBlocks a, b;
  AllocateComputed(bm, a, Range(0, 12));
  EXPECT_EQ(bm.Allocate(b, Range(0, 13), 13), 0u);
  EXPECT_EQ(bm.num_cached_blocks(), 0u);
  EXPECT_EQ(bm.num_used_blocks(), 7u);
}

TEST(BlockManager, FreedCachedBlocksStayFindableAndAreEvictedLeastRecentlyFreedFirst) {
  BlockManager bm(6, 2);
  SeqBlocks a, c;
  const auto pa = Range(0, 5);    // 2 full blocks + 1 partial
  const auto pc = Range(50, 55);  // same shape, other content
  AllocateComputed(bm, a, pa);
  AllocateComputed(bm, c, pc);
  bm.Free(a);  // freed first: evicted first
  bm.Free(c);
  EXPECT_EQ(bm.num_used_blocks(), 0u);
  EXPECT_EQ(bm.num_cached_blocks(), 4u);
  EXPECT_EQ(bm.CachedPrefixTokens(pa), 4u);
  EXPECT_EQ(bm.CachedPrefixTokens(pc), 4u);

  // Two fresh blocks: the uncached partial blocks are reused first, nothing is evicted.
  SeqBlocks x;
  bm.Allocate(x, Range(900, 904), 4);
  EXPECT_EQ(bm.num_cached_blocks(), 4u);
  EXPECT_EQ(bm.CachedPrefixTokens(pa), 4u);
  // The next one evicts a's tail block (a was freed first, its tail before its head).
  bm.Grow(x, 6);
  EXPECT_EQ(bm.CachedPrefixTokens(pa), 2u);
  EXPECT_EQ(bm.CachedPrefixTokens(pc), 4u);
  bm.Grow(x, 8);
  EXPECT_EQ(bm.CachedPrefixTokens(pa), 0u);
  EXPECT_EQ(bm.CachedPrefixTokens(pc), 4u);

  // A hit revives a free cached block: it leaves the free list.
  SeqBlocks y;
  EXPECT_EQ(bm.NumBlocksToAllocate(pc, 5), 3u);  // 2 revived + 1 fresh
  EXPECT_FALSE(bm.CanAllocate(pc, 5));           // only 2 free
  EXPECT_EQ(bm.NumBlocksToAllocate(pc, 4), 2u);
  EXPECT_EQ(bm.Allocate(y, pc, 4), 4u);
  EXPECT_EQ(bm.num_free_blocks(), 0u);
  bm.CheckInvariants();
  bm.Free(x);
  bm.Free(y);
  EXPECT_EQ(bm.num_used_blocks(), 0u);
  bm.ResetPrefixCache();
  EXPECT_EQ(bm.num_cached_blocks(), 0u);
  bm.CheckInvariants();
}

// Every block hashes alike: lookups must still never return a block with other content.
uint64_t ConstantHash(uint64_t, std::span<const int32_t>) {
  return 42;
}

TEST(BlockManager, HashCollisionsNeverShareWrongBlocks) {
  BlockManager bm(16, 2, BlockManager::Options{.prefix_caching = true, .hash_fn = &ConstantHash});
  SeqBlocks a, b, c;
  AllocateComputed(bm, a, std::vector<int32_t>{1, 2, 3});
  EXPECT_EQ(bm.Allocate(b, std::vector<int32_t>{5, 6, 7}, 3), 0u);  // same hash, other tokens
  EXPECT_EQ(bm.Allocate(c, std::vector<int32_t>{1, 2, 9}, 3), 2u);  // real match
  EXPECT_EQ(c.table[0], a.table[0]);
  bm.CheckInvariants();
}

// Ignores the parent: chains that differ only in earlier blocks collide.
uint64_t FirstTokenHash(uint64_t, std::span<const int32_t> tokens) {
  return static_cast<uint64_t>(tokens[0]);
}

// A cached block's predecessor is reused for other content (it lost its own cache entry to a
// collision, so it is recycled first) and then registered again: the child entry, which still
// names that block as its parent, must not match the new content.
TEST(BlockManager, ChildOfARecycledParentIsNotMatched) {
  BlockManager bm(8, 2, BlockManager::Options{.prefix_caching = true, .hash_fn = &FirstTokenHash});
  SeqBlocks a, d, e, f;
  AllocateComputed(bm, a, std::vector<int32_t>{1, 2, 3, 4, 9});  // P = (1,2), C = (3,4), child of P
  const int32_t p = a.table[0];
  bm.Free(a);
  AllocateComputed(bm, d,
                   std::vector<int32_t>{1, 7, 0});  // (1,7) collides with P and takes its entry
  EXPECT_FALSE(bm.IsCached(p));
  AllocateComputed(bm, e, std::vector<int32_t>{5, 6, 8});  // recycles P for (5,6)
  EXPECT_EQ(e.table[0], p);
  EXPECT_TRUE(bm.IsCached(p));
  // (5,6) is found; (3,4) after it is C's content but C's KV was computed after (1,2).
  EXPECT_EQ(bm.Allocate(f, std::vector<int32_t>{5, 6, 3, 4, 0}, 5), 2u);
  bm.CheckInvariants();
}

// A one-bit prefix-chain hash collides all the time; a mirror of each block's contents (the full
// prefix ending at each row, as real KV would depend on) proves every hit is right.
uint64_t WeakHash(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = parent;
  for (int32_t t : tokens) h += static_cast<uint64_t>(t);
  return h & 1;
}

struct SimSeq {
  SeqBlocks blocks;
  std::vector<int32_t> tokens;
  size_t computed = 0;
};

// Identity of the KV at each position: a hash of the whole prefix up to it.
std::vector<uint64_t> PrefixIds(const std::vector<int32_t>& tokens) {
  std::vector<uint64_t> ids;
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : tokens) {
    h = (h ^ static_cast<uint32_t>(t)) * 1099511628211ull;
    ids.push_back(h);
  }
  return ids;
}

void RunStress(BlockManager::Options options, uint64_t seed) {
  const size_t num_blocks = 64, block_size = 4;
  BlockManager bm(num_blocks, block_size, options);
  std::mt19937_64 rng(seed);
  std::map<int, SimSeq> live;
  std::vector<std::vector<uint64_t>> kv(num_blocks, std::vector<uint64_t>(block_size, 0));
  int next_id = 0;
  // Few distinct prefixes so that sharing happens often.
  auto random_tokens = [&](size_t n) {
    std::vector<int32_t> t;
    const int32_t family = static_cast<int32_t>(rng() % 3);
    for (size_t i = 0; i < n; ++i) t.push_back(rng() % 4 == 0 ? int32_t(rng() % 5) : family);
    return t;
  };
  // Writes KV rows [from, to) of `s`: only into blocks nobody else holds.
  auto compute = [&](SimSeq& s, size_t to) {
    const auto ids = PrefixIds(s.tokens);
    for (size_t p = s.computed; p < to; ++p) {
      const int32_t b = s.blocks.table[p / block_size];
      ASSERT_EQ(bm.ref_count(b), 1) << "writing into a shared block";
      kv[b][p % block_size] = ids[p];
    }
    s.computed = to;
    bm.CacheComputedBlocks(s.blocks, s.tokens, s.computed);
  };
  auto check_contents = [&](const SimSeq& s) {
    const auto ids = PrefixIds(s.tokens);
    for (size_t p = 0; p < s.computed; ++p)
      ASSERT_EQ(kv[s.blocks.table[p / block_size]][p % block_size], ids[p]) << "position " << p;
  };

  for (int op = 0; op < 3000; ++op) {
    const int kind = static_cast<int>(rng() % 10);
    if (kind < 4) {  // new sequence, computing its prompt in one or two chunks
      SimSeq s;
      s.tokens = random_tokens(1 + rng() % 20);
      const size_t first = 1 + rng() % s.tokens.size();
      if (!bm.CanAllocate(s.tokens, first)) continue;
      const size_t cached = bm.Allocate(s.blocks, s.tokens, first);
      ASSERT_EQ(cached % block_size, 0u);
      ASSERT_LT(cached, s.tokens.size());
      s.computed = cached;
      check_contents(s);  // the shared prefix holds exactly our KV
      compute(s, std::max(first, cached));
      live.emplace(next_id++, std::move(s));
    } else if (kind < 7 && !live.empty()) {  // grow: finish the prompt or decode a token
      auto it = std::next(live.begin(), rng() % live.size());
      SimSeq& s = it->second;
      if (s.computed == s.tokens.size()) s.tokens.push_back(static_cast<int32_t>(rng() % 5));
      const size_t to = std::min(s.tokens.size(), s.computed + 1 + rng() % 6);
      if (!bm.CanGrow(s.blocks, to)) continue;
      bm.Grow(s.blocks, to);
      compute(s, to);
    } else if (kind < 9 && !live.empty()) {
      auto it = std::next(live.begin(), rng() % live.size());
      check_contents(it->second);
      bm.Free(it->second.blocks);
      live.erase(it);
    } else if (!live.empty()) {  // fork at the computed length
      auto it = std::next(live.begin(), rng() % live.size());
      SimSeq& parent = it->second;
      if (parent.computed == 0 || bm.NumBlocksToFork(parent.computed) > bm.num_free_blocks())
        continue;
      SimSeq child;
      child.tokens.assign(parent.tokens.begin(), parent.tokens.begin() + parent.computed);
      child.computed = parent.computed;
      if (auto copy = bm.Fork(parent.blocks, child.blocks, parent.computed)) {
        ASSERT_EQ(bm.ref_count(copy->second), 1);
        kv[copy->second] = kv[copy->first];
      }
      check_contents(child);
      live.emplace(next_id++, std::move(child));
    }
    if (op % 50 == 0) {
      bm.CheckInvariants();
      std::vector<int> holders(num_blocks, 0);
      for (const auto& [id, s] : live)
        for (int32_t b : s.blocks.table) ++holders[b];
      for (size_t b = 0; b < num_blocks; ++b)
        ASSERT_EQ(holders[b], bm.ref_count(static_cast<int32_t>(b))) << "block " << b;
      for (const auto& [id, s] : live) check_contents(s);
    }
  }
  for (auto& [id, s] : live) bm.Free(s.blocks);
  EXPECT_EQ(bm.num_used_blocks(), 0u);
  EXPECT_EQ(bm.num_free_blocks(), num_blocks);
  bm.CheckInvariants();
  if (options.prefix_caching) {
    EXPECT_GT(bm.stats().hit_tokens, 0u);
  }
}

TEST(BlockManager, RandomizedStress) {
  for (uint64_t seed = 0; seed < 4; ++seed) {
    RunStress({.prefix_caching = true, .hash_fn = &HashBlockTokens}, seed);
    RunStress({.prefix_caching = true, .hash_fn = &WeakHash}, seed);
    RunStress({.prefix_caching = false, .hash_fn = &HashBlockTokens}, seed);
  }
}

TEST(BlockManager, ForkSharesFullBlocksAndCopiesThePartialOne) {
  BlockManager bm(10, 4);
  SeqBlocks parent, child, child2;
  AllocateComputed(bm, parent, Range(0, 10));
  const auto copy = bm.Fork(parent, child, 10);
  ASSERT_TRUE(copy.has_value());
  EXPECT_EQ(copy->first, parent.table[2]);
  EXPECT_EQ(copy->second, child.table[2]);
  EXPECT_NE(child.table[2], parent.table[2]);
  EXPECT_EQ(bm.ref_count(parent.table[0]), 2);
  EXPECT_EQ(bm.ref_count(parent.table[1]), 2);
  EXPECT_EQ(bm.ref_count(parent.table[2]), 1);
  EXPECT_FALSE(bm.Fork(parent, child2, 8).has_value());  // block-aligned: nothing to copy
  EXPECT_EQ(bm.ref_count(parent.table[0]), 3);
  bm.Free(parent);
  bm.Free(child);
  bm.Free(child2);
  EXPECT_EQ(bm.num_used_blocks(), 0u);
  bm.CheckInvariants();
}

TEST(BlockManager, HashIsChainedAndContentSensitive) {
  const std::vector<int32_t> a = {1, 2, 3, 4}, b = {1, 2, 3, 5};
  EXPECT_NE(HashBlockTokens(kRootBlockHash, a), HashBlockTokens(kRootBlockHash, b));
  EXPECT_NE(HashBlockTokens(kRootBlockHash, a), HashBlockTokens(7, a));
  EXPECT_EQ(HashBlockTokens(7, a), HashBlockTokens(7, a));
}

}  // namespace
}  // namespace moeserve::cache
