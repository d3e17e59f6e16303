#include "cache/kv_pool.h"

#include "core/check.h"

namespace moeserve {

namespace cache {
namespace {
constexpr size_t kAlign = 64;
size_t AlignedBlockBytes(const model::KvLayout& layout, size_t block_size) {
  return (layout.BlockBytes(block_size) + kAlign - 1) / kAlign * kAlign;
}
}  // namespace

KvPool::KvPool(const model::KvLayout& layout, size_t block_size, size_t num_blocks)
    : layout_(layout),
      block_size_(block_size),
      num_blocks_(num_blocks),
      block_bytes_(AlignedBlockBytes(layout, block_size)) {
  MOESERVE_CHECK(block_size > 0 && num_blocks > 0);
  const size_t total = layout.num_layers * num_blocks * block_bytes_ + kAlign;
  keys_ = ResidentMemory(total);
  values_ = ResidentMemory(total);
}

namespace {
uint8_t* Align(uint8_t* p) {
  return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + kAlign - 1) / kAlign *
                                    kAlign);
}
}  // namespace

uint8_t* KvPool::KeyBlock(size_t layer, int32_t block) {
  MOESERVE_CHECK(
      layer < layout_.num_layers && block >= 0 && static_cast<size_t>(block) < num_blocks_, layer,
      " ", block);
  return Align(keys_.data()) + (layer * num_blocks_ + static_cast<size_t>(block)) * block_bytes_;
}

uint8_t* KvPool::ValueBlock(size_t layer, int32_t block) {
  MOESERVE_CHECK(
      layer < layout_.num_layers && block >= 0 && static_cast<size_t>(block) < num_blocks_, layer,
      " ", block);
  return Align(values_.data()) + (layer * num_blocks_ + static_cast<size_t>(block)) * block_bytes_;
}

size_t KvPool::BytesPerBlock() const {
  return 2 * layout_.num_layers * block_bytes_;
}

size_t KvPool::BlocksForBytes(const model::KvLayout& layout, size_t block_size, size_t bytes) {
  return bytes / (2 * layout.num_layers * AlignedBlockBytes(layout, block_size));
}

}  // namespace cache
}  // namespace moeserve
