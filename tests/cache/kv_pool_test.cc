// The KV pool's memory accounting: FP8 blocks fit about twice as many tokens in the same bytes.
#include "cache/kv_pool.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <set>
#include <vector>

namespace moeserve::cache {
namespace {

// Pages of [p, p + bytes) that are not resident (mincore).
size_t NonResidentPages(const uint8_t* p, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes;
  std::vector<unsigned char> vec((end - begin + page - 1) / page);
  EXPECT_EQ(mincore(reinterpret_cast<void*>(begin), end - begin, vec.data()), 0);
  size_t missing = 0;
  for (unsigned char v : vec) missing += !(v & 1);
  return missing;
}

// The whole pool is resident before any block is written (resident_memory.h: the soak's RSS steps
// were KV pages touched for the first time by a burst), and reads as zeros.
TEST(KvPool, EveryBlockIsResidentBeforeItIsWritten) {
  model::KvLayout layout{3, 2, 64, DType::kBF16};
  const size_t blocks = 257;  // ~6 MiB per K and V: many pages, not a multiple of a huge page
  KvPool pool(layout, 16, blocks);
  const size_t block_bytes = layout.BlockBytes(16);
  for (size_t layer = 0; layer < layout.num_layers; ++layer) {
    for (int32_t b : {0, 128, 256}) {
      EXPECT_EQ(NonResidentPages(pool.KeyBlock(layer, b), block_bytes), 0u) << layer << " " << b;
      EXPECT_EQ(NonResidentPages(pool.ValueBlock(layer, b), block_bytes), 0u) << layer << " " << b;
    }
  }
  const uint8_t* first = pool.KeyBlock(0, 0);
  const uint8_t* last = pool.ValueBlock(layout.num_layers - 1, static_cast<int32_t>(blocks - 1));
  EXPECT_EQ(NonResidentPages(first, block_bytes * layout.num_layers * blocks), 0u);
  for (size_t i = 0; i < block_bytes; ++i) ASSERT_EQ(last[i], 0) << i;
}

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
