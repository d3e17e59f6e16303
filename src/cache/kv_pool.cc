#include "cache/kv_pool.h"

#include "core/check.h"

namespace moeserve::cache {

KvPool::KvPool(const model::KvLayout& layout, size_t block_size, size_t num_blocks)
    : layout_(layout),
      block_size_(block_size),
      num_blocks_(num_blocks),
      block_elems_(block_size * layout.num_kv_heads * layout.head_dim) {
  MOESERVE_CHECK(block_size > 0 && num_blocks > 0);
  const size_t total = layout.num_layers * num_blocks * block_elems_;
  // Default-initialised (not zeroed): pages are touched only when a block is first written.
  keys_.reset(new bf16[total]);
  values_.reset(new bf16[total]);
}

bf16* KvPool::KeyBlock(size_t layer, int32_t block) {
  MOESERVE_CHECK(layer < layout_.num_layers && block >= 0 &&
                     static_cast<size_t>(block) < num_blocks_,
                 layer, " ", block);
  return keys_.get() + (layer * num_blocks_ + static_cast<size_t>(block)) * block_elems_;
}

bf16* KvPool::ValueBlock(size_t layer, int32_t block) {
  MOESERVE_CHECK(layer < layout_.num_layers && block >= 0 &&
                     static_cast<size_t>(block) < num_blocks_,
                 layer, " ", block);
  return values_.get() + (layer * num_blocks_ + static_cast<size_t>(block)) * block_elems_;
}

size_t KvPool::BytesPerBlock() const { return block_size_ * layout_.BytesPerToken(); }

size_t KvPool::BlocksForBytes(const model::KvLayout& layout, size_t block_size, size_t bytes) {
  return bytes / (block_size * layout.BytesPerToken());
}

}  // namespace moeserve::cache
