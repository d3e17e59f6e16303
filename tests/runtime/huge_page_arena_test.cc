#include "runtime/huge_page_arena.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace moeserve {
namespace {

struct Block {
  uint8_t* p;
  size_t n;
};

// Every block writable over its whole length, 64-byte aligned, and disjoint from the others.
void ExpectDisjointAndWritable(std::vector<Block> blocks) {
  for (size_t i = 0; i < blocks.size(); ++i) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(blocks[i].p) % 64, 0u) << "block " << i;
    std::memset(blocks[i].p, static_cast<int>(i + 1), blocks[i].n);
  }
  for (size_t i = 0; i < blocks.size(); ++i)
    for (size_t j : {size_t{0}, blocks[i].n / 2, blocks[i].n - 1})
      EXPECT_EQ(blocks[i].p[j], static_cast<uint8_t>(i + 1)) << "block " << i << " byte " << j;
  std::sort(blocks.begin(), blocks.end(), [](const Block& a, const Block& b) { return a.p < b.p; });
  for (size_t i = 1; i < blocks.size(); ++i)
    EXPECT_GE(blocks[i].p, blocks[i - 1].p + blocks[i - 1].n);
}

TEST(HugePageArena, SmallAndOddSizesShareSlabsWithoutOverlap) {
  HugePageArena arena;
  std::vector<Block> blocks;
  size_t asked = 0;
  for (size_t n : {1, 63, 64, 65, 4095, 4097, 1 << 20, 3 << 20, 7, 0}) {
    blocks.push_back({arena.Allocate(n), n == 0 ? 1 : n});
    asked += n;
  }
  ExpectDisjointAndWritable(blocks);
  EXPECT_GE(arena.allocated_bytes(), asked);
  EXPECT_LT(arena.allocated_bytes(), asked + 64 * blocks.size());
  EXPECT_EQ(arena.mapped_bytes(), HugePageArena::kSlabBytes);  // one slab held them all
}

TEST(HugePageArena, SlabsStartOnHugePageBoundaries) {
  HugePageArena arena;
  uint8_t* first = arena.Allocate(100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % HugePageArena::kHugePage, 0u);
  // Filling the slab makes the next allocation start a new, aligned one.
  arena.Allocate(HugePageArena::kSlabBytes / 2 - 128);
  arena.Allocate(HugePageArena::kSlabBytes / 2 - 128);
  uint8_t* next = arena.Allocate(4096);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(next) % HugePageArena::kHugePage, 0u);
  EXPECT_EQ(arena.mapped_bytes(), 2 * HugePageArena::kSlabBytes);
}

TEST(HugePageArena, LargeAllocationGetsItsOwnSlabAndKeepsTheCurrentOne) {
  HugePageArena arena;
  uint8_t* small = arena.Allocate(1000);
  const size_t big_n = HugePageArena::kSlabBytes + 12345;
  uint8_t* big = arena.Allocate(big_n);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % HugePageArena::kHugePage, 0u);
  // The small slab's tail still serves: the next small block follows the first one.
  uint8_t* small2 = arena.Allocate(1000);
  EXPECT_EQ(small2, small + 1024);
  ExpectDisjointAndWritable({{small, 1000}, {big, big_n}, {small2, 1000}});
  const size_t big_mapped =
      (big_n + HugePageArena::kHugePage - 1) / HugePageArena::kHugePage * HugePageArena::kHugePage;
  EXPECT_EQ(arena.mapped_bytes(), HugePageArena::kSlabBytes + big_mapped);
}

TEST(HugePageArena, MoveKeepsTheMemory) {
  HugePageArena a;
  uint8_t* p = a.Allocate(256);
  std::memset(p, 0x5a, 256);
  HugePageArena b(std::move(a));
  EXPECT_EQ(a.allocated_bytes(), 0u);
  EXPECT_EQ(a.mapped_bytes(), 0u);
  EXPECT_EQ(b.allocated_bytes(), 256u);
  HugePageArena c;
  c.Allocate(64);
  c = std::move(b);  // c's own slab is released, b's memory now c's
  EXPECT_EQ(c.allocated_bytes(), 256u);
  EXPECT_EQ(p[255], 0x5a);
}

}  // namespace
}  // namespace moeserve
