#include "cache/block_manager.h"

#include <algorithm>

#include "core/check.h"

namespace moeserve::cache {
namespace {

uint64_t Rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

// MurmurHash3's 64-bit finalizer: every input bit affects every output bit.
uint64_t Fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k;
}

}  // namespace

uint64_t HashBlockTokens(uint64_t parent_hash, std::span<const int32_t> tokens) {
  // Murmur-style mixing of one 32-bit token per round, keyed by the parent hash and the length.
  constexpr uint64_t c1 = 0x87c37b91114253d5ull, c2 = 0x4cf5ad432745937full;
  uint64_t h = Fmix64(parent_hash ^ (tokens.size() * 0x9e3779b97f4a7c15ull));
  for (int32_t token : tokens) {
    uint64_t k = static_cast<uint64_t>(static_cast<uint32_t>(token)) * c1;
    k = Rotl(k, 31) * c2;
    h ^= k;
    h = Rotl(h, 27) * 5 + 0x52dce729;
  }
  return Fmix64(h ^ parent_hash);
}

BlockManager::BlockManager(size_t num_blocks, size_t block_size, bool prefix_caching)
    : BlockManager(num_blocks, block_size, Options{.prefix_caching = prefix_caching}) {}

BlockManager::BlockManager(size_t num_blocks, size_t block_size, Options options)
    : block_size_(block_size), options_(options), blocks_(num_blocks) {
  MOESERVE_CHECK(block_size > 0 && num_blocks > 0, "block_size ", block_size, " num_blocks ",
                 num_blocks);
  MOESERVE_CHECK(num_blocks < (1ull << 31), "num_blocks ", num_blocks);
  MOESERVE_CHECK(options_.hash_fn != nullptr);
  for (size_t b = 0; b < num_blocks; ++b) PushFree(static_cast<int32_t>(b), /*front=*/false);
}

void BlockManager::Unlink(int32_t b) {
  Block& block = blocks_[b];
  (block.prev >= 0 ? blocks_[block.prev].next : free_head_) = block.next;
  (block.next >= 0 ? blocks_[block.next].prev : free_tail_) = block.prev;
  block.prev = block.next = -1;
  --num_free_;
}

void BlockManager::PushFree(int32_t b, bool front) {
  Block& block = blocks_[b];
  if (front) {
    block.prev = -1;
    block.next = free_head_;
    (free_head_ >= 0 ? blocks_[free_head_].prev : free_tail_) = b;
    free_head_ = b;
  } else {
    block.next = -1;
    block.prev = free_tail_;
    (free_tail_ >= 0 ? blocks_[free_tail_].next : free_head_) = b;
    free_tail_ = b;
  }
  ++num_free_;
}

void BlockManager::Uncache(int32_t b) {
  Block& block = blocks_[b];
  if (!block.cached) return;
  auto it = cache_.find(block.hash);
  if (it != cache_.end() && it->second == b) cache_.erase(it);
  block.cached = false;
  block.tokens.clear();
  block.parent = -1;
}

int32_t BlockManager::TakeFreeBlock() {
  MOESERVE_CHECK(free_head_ >= 0, "no free KV block");
  const int32_t b = free_head_;
  Unlink(b);
  Uncache(b);
  Block& block = blocks_[b];
  ++block.generation;
  block.ref_count = 1;
  return b;
}

bool BlockManager::EntryMatches(int32_t b, uint64_t hash, int32_t parent,
                                std::span<const int32_t> tokens) const {
  const Block& block = blocks_[b];
  if (!block.cached || block.hash != hash || block.parent != parent) return false;
  // The predecessor must still hold what it held when this block was registered.
  if (parent >= 0 && blocks_[parent].generation != block.parent_generation) return false;
  return std::equal(block.tokens.begin(), block.tokens.end(), tokens.begin(), tokens.end());
}

std::vector<int32_t> BlockManager::MatchPrefix(std::span<const int32_t> tokens,
                                               size_t max_blocks) const {
  std::vector<int32_t> matched;
  if (!options_.prefix_caching) return matched;
  uint64_t parent_hash = kRootBlockHash;
  int32_t parent = -1;
  for (size_t i = 0; i < max_blocks; ++i) {
    const auto chunk = tokens.subspan(i * block_size_, block_size_);
    const uint64_t hash = options_.hash_fn(parent_hash, chunk);
    auto it = cache_.find(hash);
    if (it == cache_.end() || !EntryMatches(it->second, hash, parent, chunk)) break;
    parent = it->second;
    parent_hash = hash;
    matched.push_back(parent);
  }
  return matched;
}

size_t BlockManager::CachedPrefixTokens(std::span<const int32_t> tokens) const {
  const size_t max_blocks = tokens.empty() ? 0 : (tokens.size() - 1) / block_size_;
  return MatchPrefix(tokens, max_blocks).size() * block_size_;
}

size_t BlockManager::NumBlocksToAllocate(std::span<const int32_t> tokens, size_t num_tokens) const {
  const size_t max_blocks = tokens.empty() ? 0 : (tokens.size() - 1) / block_size_;
  const std::vector<int32_t> matched = MatchPrefix(tokens, max_blocks);
  size_t revived = 0;
  for (int32_t b : matched) revived += blocks_[b].ref_count == 0 ? 1 : 0;
  const size_t total = std::max(BlocksFor(num_tokens), matched.size());
  return revived + (total - matched.size());
}

size_t BlockManager::Allocate(SeqBlocks& seq, std::span<const int32_t> tokens, size_t num_tokens) {
  MOESERVE_CHECK(seq.table.empty() && seq.hashes.empty(), "sequence already holds ",
                 seq.table.size(), " blocks");
  MOESERVE_CHECK(CanAllocate(tokens, num_tokens), "needs ", NumBlocksToAllocate(tokens, num_tokens),
                 " blocks, ", num_free_, " free");
  const size_t max_blocks = tokens.empty() ? 0 : (tokens.size() - 1) / block_size_;
  const std::vector<int32_t> matched = MatchPrefix(tokens, max_blocks);
  for (int32_t b : matched) {
    Block& block = blocks_[b];
    if (block.ref_count++ == 0) Unlink(b);
    seq.table.push_back(b);
    seq.hashes.push_back(block.hash);
  }
  const size_t cached_tokens = matched.size() * block_size_;
  if (options_.prefix_caching) {
    stats_.queried_tokens += tokens.size();
    stats_.hit_tokens += cached_tokens;
  }
  Grow(seq, num_tokens);
  return cached_tokens;
}

size_t BlockManager::NumBlocksToGrow(const SeqBlocks& seq, size_t num_tokens) const {
  const size_t need = BlocksFor(num_tokens);
  return need > seq.table.size() ? need - seq.table.size() : 0;
}

void BlockManager::Grow(SeqBlocks& seq, size_t num_tokens) {
  MOESERVE_CHECK(CanGrow(seq, num_tokens), "needs ", NumBlocksToGrow(seq, num_tokens), " blocks, ",
                 num_free_, " free");
  while (seq.table.size() < BlocksFor(num_tokens)) seq.table.push_back(TakeFreeBlock());
}

void BlockManager::CacheComputedBlocks(SeqBlocks& seq, std::span<const int32_t> tokens,
                                       size_t num_computed_tokens) {
  if (!options_.prefix_caching) return;
  MOESERVE_CHECK(num_computed_tokens <= tokens.size(), "computed ", num_computed_tokens, " > ",
                 tokens.size(), " tokens");
  const size_t full = std::min(num_computed_tokens / block_size_, seq.table.size());
  for (size_t i = seq.hashes.size(); i < full; ++i) {
    const auto chunk = tokens.subspan(i * block_size_, block_size_);
    const uint64_t hash = options_.hash_fn(i ? seq.hashes[i - 1] : kRootBlockHash, chunk);
    seq.hashes.push_back(hash);
    const int32_t b = seq.table[i];
    Block& block = blocks_[b];
    if (block.cached) continue;  // shared from the cache: registered already
    const int32_t parent = i ? seq.table[i - 1] : -1;
    // A block whose predecessor is not findable could never be reached by a lookup.
    if (parent >= 0 && !blocks_[parent].cached) continue;
    auto it = cache_.find(hash);
    if (it != cache_.end()) {
      // The same content already registered (computed twice concurrently): keep the older one.
      if (EntryMatches(it->second, hash, parent, chunk)) continue;
      // A stale entry (its predecessor was reused) or a true collision: the newer block wins.
      const int32_t old = it->second;
      Uncache(old);
      if (blocks_[old].ref_count == 0) {  // now holds nothing findable: reuse it first
        Unlink(old);
        PushFree(old, /*front=*/true);
      }
    }
    block.cached = true;
    block.hash = hash;
    block.parent = parent;
    block.parent_generation = parent >= 0 ? blocks_[parent].generation : 0;
    block.tokens.assign(chunk.begin(), chunk.end());
    cache_[hash] = b;
  }
}

void BlockManager::Free(SeqBlocks& seq) {
  for (auto it = seq.table.rbegin(); it != seq.table.rend(); ++it) {
    Block& block = blocks_[*it];
    MOESERVE_CHECK(block.ref_count > 0, "block ", *it, " freed twice");
    if (--block.ref_count == 0) PushFree(*it, /*front=*/!block.cached);
  }
  seq.table.clear();
  seq.hashes.clear();
}

std::optional<std::pair<int32_t, int32_t>> BlockManager::Fork(const SeqBlocks& parent,
                                                              SeqBlocks& child, size_t num_tokens) {
  MOESERVE_CHECK(child.table.empty(), "fork target holds ", child.table.size(), " blocks");
  MOESERVE_CHECK(BlocksFor(num_tokens) <= parent.table.size(), "parent covers ",
                 parent.table.size(), " blocks, fork asks for ", num_tokens, " tokens");
  MOESERVE_CHECK(NumBlocksToFork(num_tokens) <= num_free_, "no free KV block for the fork");
  const size_t full = num_tokens / block_size_;
  for (size_t i = 0; i < full; ++i) {
    ++blocks_[parent.table[i]].ref_count;
    child.table.push_back(parent.table[i]);
  }
  child.hashes.assign(parent.hashes.begin(),
                      parent.hashes.begin() + std::min(full, parent.hashes.size()));
  if (num_tokens % block_size_ == 0) return std::nullopt;
  const int32_t copy = TakeFreeBlock();
  child.table.push_back(copy);
  return std::make_pair(parent.table[full], copy);
}

void BlockManager::ResetPrefixCache() {
  for (size_t b = 0; b < blocks_.size(); ++b) {
    if (blocks_[b].ref_count == 0 && blocks_[b].cached) {
      Uncache(static_cast<int32_t>(b));
      Unlink(static_cast<int32_t>(b));
      PushFree(static_cast<int32_t>(b), /*front=*/true);
    }
  }
}

void BlockManager::CheckInvariants() const {
  size_t listed = 0;
  int32_t prev = -1;
  for (int32_t b = free_head_; b >= 0; b = blocks_[b].next) {
    MOESERVE_CHECK(blocks_[b].ref_count == 0, "block ", b, " in the free list with ref count ",
                   blocks_[b].ref_count);
    MOESERVE_CHECK(blocks_[b].prev == prev, "free list link broken at block ", b);
    prev = b;
    MOESERVE_CHECK(++listed <= blocks_.size(), "free list has a cycle");
  }
  MOESERVE_CHECK(prev == free_tail_, "free list tail");
  MOESERVE_CHECK(listed == num_free_, "free list holds ", listed, ", counter says ", num_free_);
  size_t zero_refs = 0;
  for (const Block& block : blocks_) {
    MOESERVE_CHECK(block.ref_count >= 0, "negative ref count");
    zero_refs += block.ref_count == 0 ? 1 : 0;
  }
  MOESERVE_CHECK(zero_refs == num_free_, "ref 0 blocks ", zero_refs, ", free ", num_free_);
  for (const auto& [hash, b] : cache_) {
    MOESERVE_CHECK(blocks_[b].cached && blocks_[b].hash == hash, "cache entry for block ", b,
                   " is stale");
    MOESERVE_CHECK(blocks_[b].tokens.size() == block_size_, "cached block ", b, " not full");
  }
  size_t cached = 0;
  for (const Block& block : blocks_) cached += block.cached ? 1 : 0;
  MOESERVE_CHECK(cached == cache_.size(), "blocks marked cached ", cached, ", map holds ",
                 cache_.size());
}

}  // namespace moeserve::cache
