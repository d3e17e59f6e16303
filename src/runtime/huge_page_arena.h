// Memory for data that lives as long as the model and is streamed on every step (weights repacked
// at load), carved from large anonymous mappings backed by transparent huge pages where the
// kernel allows them.
//
// Why: a decode step streams every weight it touches once, hundreds of MB per token. With 4 KiB
// pages that is a TLB miss and a page walk every 4 KiB, and the hardware prefetchers stop at
// every 4 KiB boundary; 2 MiB pages remove both. Most distributions leave THP in "madvise" mode,
// so memory from malloc (what the weights used before) never gets huge pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace moeserve {

class HugePageArena {
 public:
  HugePageArena() = default;
  ~HugePageArena();
  HugePageArena(HugePageArena&& other) noexcept;
  HugePageArena& operator=(HugePageArena&& other) noexcept;
  HugePageArena(const HugePageArena&) = delete;
  HugePageArena& operator=(const HugePageArena&) = delete;

  // `bytes` of uninitialized memory aligned to 64 bytes, valid until the arena is destroyed.
  // Throws moeserve::Error when the mapping fails.
  uint8_t* Allocate(size_t bytes);

  // Bytes handed out, and bytes mapped (handed out plus the unused tail of each slab; a slab's
  // pages become resident only when touched).
  size_t allocated_bytes() const { return allocated_; }
  size_t mapped_bytes() const;

  // The huge-page size allocations are aligned for (2 MiB on x86-64).
  static constexpr size_t kHugePage = size_t{2} << 20;
  // Smallest slab mapped at once: large enough that the unused tail of the last one stays small
  // against a model's weights, small enough not to matter for a test model.
  static constexpr size_t kSlabBytes = size_t{64} << 20;

 private:
  struct Slab {
    uint8_t* base;
    size_t size;
    size_t used;
  };
  void Release();

  std::vector<Slab> slabs_;
  size_t allocated_ = 0;
};

}  // namespace moeserve
