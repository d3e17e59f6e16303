// The memory of the paged KV cache: num_blocks blocks, each holding block_size positions of K and
// of V for every layer. Which sequence owns which block is the BlockManager's business
// (block_manager.h); this class only maps (layer, block) to memory.
//
// Layout: K and V are separate arrays [num_layers][num_blocks][block bytes], so a block of one
// layer is contiguous: attention streams it with unit stride. Blocks are 64-byte aligned.
#pragma once

#include <cstddef>

#include "cache/resident_memory.h"
#include "model/batch.h"

namespace moeserve::cache {

class KvPool final : public model::KvStorage {
 public:
  // layout.dtype (bf16 or fp8 e4m3) decides the block format. The memory is resident (all pages
  // faulted in) when this returns: see resident_memory.h.
  KvPool(const model::KvLayout& layout, size_t block_size, size_t num_blocks);

  size_t block_size() const override { return block_size_; }
  DType dtype() const override { return layout_.dtype; }
  size_t num_blocks() const { return num_blocks_; }
  const model::KvLayout& layout() const { return layout_; }
  uint8_t* KeyBlock(size_t layer, int32_t block) override;
  uint8_t* ValueBlock(size_t layer, int32_t block) override;

  size_t BytesPerBlock() const;
  // How many blocks fit in `bytes`.
  static size_t BlocksForBytes(const model::KvLayout& layout, size_t block_size, size_t bytes);

 private:
  model::KvLayout layout_;
  size_t block_size_, num_blocks_, block_bytes_;
  ResidentMemory keys_, values_;
};

}  // namespace moeserve::cache
