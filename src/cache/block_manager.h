// Which KV blocks belong to which sequence: paged allocation with reference counts and a prefix
// cache (vLLM / nano-vllm style). KvPool (kv_pool.h) holds the memory; this class only hands out
// block ids.
//
// Prefix cache: every FULL block whose KV has been computed is registered under a chain hash,
// hash(previous block's hash, the block's token ids). A new sequence whose tokens start with
// registered blocks shares them (ref count + 1) instead of recomputing them. A hash hit is
// accepted only if the block's token ids and its predecessor block match, so a hash collision
// can cost a cache miss but never wrong KV. At least the last token of a prompt is always left to
// compute (its logits are needed), and only whole blocks are shared, so a sequence never writes
// into a block another sequence can see.
//
// Freed blocks that hold a registered block stay findable until they are reused. Reuse order:
// blocks holding nothing cached first, then cached ones least recently freed first (a
// sequence's blocks are freed tail first, so the start of a shared prefix survives longest).
//
// Not thread-safe: owned by the engine thread (through the Scheduler).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

namespace moeserve::cache {

// Chain hash of one full block given its predecessor's hash (kRootBlockHash for the first).
using BlockHashFn = uint64_t (*)(uint64_t parent_hash, std::span<const int32_t> tokens);
uint64_t HashBlockTokens(uint64_t parent_hash, std::span<const int32_t> tokens);
inline constexpr uint64_t kRootBlockHash = 0xcbf29ce484222325ull;

// One sequence's share of the cache.
struct SeqBlocks {
  // Position p of the sequence lives in block table[p / block_size], row p % block_size.
  std::vector<int32_t> table;
  // Chain hashes of table[0 .. hashes.size()): the leading full, computed blocks already offered
  // to the prefix cache.
  std::vector<uint64_t> hashes;
};

struct PrefixCacheStats {
  uint64_t queried_tokens = 0;  // prompt tokens looked up by Allocate
  uint64_t hit_tokens = 0;      // of those, found in the cache
};

class BlockManager {
 public:
  struct Options {
    bool prefix_caching = true;
    BlockHashFn hash_fn = &HashBlockTokens;  // tests substitute a weak one to force collisions
  };

  BlockManager(size_t num_blocks, size_t block_size, bool prefix_caching = true);
  BlockManager(size_t num_blocks, size_t block_size, Options options);

  size_t block_size() const { return block_size_; }
  size_t num_blocks() const { return blocks_.size(); }
  bool prefix_caching() const { return options_.prefix_caching; }
  // Blocks needed to hold `num_tokens` positions.
  size_t BlocksFor(size_t num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }

  // Tokens at the start of `tokens` that Allocate would find in the prefix cache.
  size_t CachedPrefixTokens(std::span<const int32_t> tokens) const;
  // For a sequence without blocks: how many blocks Allocate(tokens, num_tokens) would take from
  // the free pool (fresh ones plus cached ones revived from the free list).
  size_t NumBlocksToAllocate(std::span<const int32_t> tokens, size_t num_tokens) const;
  bool CanAllocate(std::span<const int32_t> tokens, size_t num_tokens) const {
    return NumBlocksToAllocate(tokens, num_tokens) <= num_free_;
  }
  // Starts `seq` (which must hold no blocks): shares the longest cached run of full blocks that
  // starts `tokens` (covering at most tokens.size() - 1 tokens), then adds fresh blocks until
  // the table covers max(num_tokens, cached) positions. Returns the number of cached tokens (a
  // multiple of block_size). Checks CanAllocate.
  size_t Allocate(SeqBlocks& seq, std::span<const int32_t> tokens, size_t num_tokens);

  // Growing a running sequence's table to cover `num_tokens` positions.
  size_t NumBlocksToGrow(const SeqBlocks& seq, size_t num_tokens) const;
  bool CanGrow(const SeqBlocks& seq, size_t num_tokens) const {
    return NumBlocksToGrow(seq, num_tokens) <= num_free_;
  }
  void Grow(SeqBlocks& seq, size_t num_tokens);

  // Registers in the prefix cache the full blocks among the first `num_computed_tokens` of
  // `tokens` (the sequence's prompt + output ids). Call once their KV has been written, i.e.
  // after the forward step, never before: a block is findable only when its KV is final.
  void CacheComputedBlocks(SeqBlocks& seq, std::span<const int32_t> tokens,
                           size_t num_computed_tokens);

  // Releases every block of `seq` and clears it.
  void Free(SeqBlocks& seq);

  // For n > 1 after the prompt is computed: `child` (empty) shares the full blocks covering the
  // first `num_tokens` positions of `parent`; a partially filled last block is not shared but
  // given a fresh block, and the returned (source, destination) pair says which block's KV rows
  // the caller must copy (all layers, K and V) before the child's next forward step. Copying
  // instead of copy-on-write keeps the invariant "a shared block is never written".
  size_t NumBlocksToFork(size_t num_tokens) const { return num_tokens % block_size_ ? 1 : 0; }
  std::optional<std::pair<int32_t, int32_t>> Fork(const SeqBlocks& parent, SeqBlocks& child,
                                                  size_t num_tokens);

  size_t num_free_blocks() const { return num_free_; }
  size_t num_used_blocks() const { return blocks_.size() - num_free_; }
  double Usage() const {
    return blocks_.empty() ? 0.0 : static_cast<double>(num_used_blocks()) / blocks_.size();
  }
  // Blocks findable in the prefix cache (in use or free).
  size_t num_cached_blocks() const { return cache_.size(); }
  const PrefixCacheStats& stats() const { return stats_; }
  void ResetPrefixCache();  // forget cached free blocks (e.g. after weights change)

  // For tests and debugging.
  int32_t ref_count(int32_t block) const { return blocks_.at(block).ref_count; }
  bool IsCached(int32_t block) const { return blocks_.at(block).cached; }
  // MOESERVE_CHECKs the internal invariants (free list vs ref counts, cache map vs blocks).
  void CheckInvariants() const;

 private:
  struct Block {
    int32_t ref_count = 0;
    uint64_t generation = 0;  // bumped whenever the block is handed out afresh
    // Prefix cache entry, valid while `cached`.
    bool cached = false;
    uint64_t hash = 0;
    int32_t parent = -1;  // the block holding the previous block_size tokens, -1 for the first
    uint64_t parent_generation = 0;
    std::vector<int32_t> tokens;
    // Free list links (valid while ref_count == 0).
    int32_t prev = -1, next = -1;
  };

  // Cached blocks that continue `tokens` from the start, at most `max_blocks`.
  std::vector<int32_t> MatchPrefix(std::span<const int32_t> tokens, size_t max_blocks) const;
  bool EntryMatches(int32_t block, uint64_t hash, int32_t parent,
                    std::span<const int32_t> tokens) const;
  int32_t TakeFreeBlock();                   // fresh block, ref 1, evicting its cache entry
  void Uncache(int32_t block);               // drops the cache entry of `block`
  void PushFree(int32_t block, bool front);  // free list: front = reused first
  void Unlink(int32_t block);

  size_t block_size_;
  Options options_;
  std::vector<Block> blocks_;
  std::unordered_map<uint64_t, int32_t> cache_;  // chain hash -> block
  int32_t free_head_ = -1, free_tail_ = -1;
  size_t num_free_ = 0;
  PrefixCacheStats stats_;
};

}  // namespace moeserve::cache
