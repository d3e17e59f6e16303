// The KV pool's memory accounting: FP8 blocks fit about twice as many tokens in the same bytes.
#include "cache/kv_pool.h"

#include <gtest/gtest.h>

#include <set>

namespace moeserve::cache {
namespace {

TEST(KvPool, Fp8DoublesTheBlocksForTheSameMemory) {
  model::KvLayout bf16_layout{62, 8, 128, DType::kBF16};  // MiniMax-M2.1 per rank at tp 1
  model::KvLayout fp8_layout = bf16_layout;
  fp8_layout.dtype = DType::kF8E4M3;
  const size_t budget = size_t{8} << 30;
  const size_t bf16_blocks = KvPool::BlocksForBytes(bf16_layout, 16, budget);
  const size_t fp8_blocks = KvPool::BlocksForBytes(fp8_layout, 16, budget);
  // 128 codes + one f32 scale per (token, head) = 132 bytes vs 256: 1.94x.
  EXPECT_GE(fp8_blocks * 100, bf16_blocks * 190) << bf16_blocks << " vs " << fp8_blocks;
  EXPECT_EQ(bf16_layout.BytesPerToken(), 62u * 2 * 8 * 128 * 2);  // 248 KiB, MINIMAX-M2.md
}

TEST(KvPool, BlocksAreDistinctAlignedAndInBounds) {
  for (DType dtype : {DType::kBF16, DType::kF8E4M3}) {
    model::KvLayout layout{3, 2, 24, dtype};
    KvPool pool(layout, 5, 7);
    std::set<const uint8_t*> seen;
    for (size_t layer = 0; layer < 3; ++layer) {
      for (int32_t b = 0; b < 7; ++b) {
        uint8_t* k = pool.KeyBlock(layer, b);
        uint8_t* v = pool.ValueBlock(layer, b);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(k) % 64, 0u);
        EXPECT_TRUE(seen.insert(k).second && seen.insert(v).second);
        // The whole block is writable (ASan would flag an overrun).
        std::fill(k, k + layout.BlockBytes(5), uint8_t{1});
        std::fill(v, v + layout.BlockBytes(5), uint8_t{2});
      }
    }
  }
}

}  // namespace
}  // namespace moeserve::cache
