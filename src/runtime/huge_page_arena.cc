#include "runtime/huge_page_arena.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/check.h"

namespace moeserve {
namespace {

constexpr size_t kAlign = 64;

size_t RoundUp(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

// `size` bytes (a multiple of the huge-page size) at a huge-page-aligned address: map one huge
// page more than asked and trim both ends, since mmap only promises 4 KiB alignment.
uint8_t* MapAligned(size_t size) {
  const size_t padded = size + HugePageArena::kHugePage;
  void* p = mmap(nullptr, padded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw Error(
        detail::Concat("cannot map ", size, " bytes for repacked weights: ", std::strerror(errno)));
  const auto raw = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = RoundUp(raw, HugePageArena::kHugePage);
  if (aligned > raw) munmap(p, aligned - raw);
  const uintptr_t end = aligned + size;
  if (raw + padded > end) munmap(reinterpret_cast<void*>(end), raw + padded - end);
  // Advice only: with THP off (or "never") these stay 4 KiB pages and everything still works.
  madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
  return reinterpret_cast<uint8_t*>(aligned);
}

}  // namespace

HugePageArena::~HugePageArena() {
  Release();
}

HugePageArena::HugePageArena(HugePageArena&& other) noexcept
    : slabs_(std::move(other.slabs_)), allocated_(other.allocated_) {
  other.slabs_.clear();
  other.allocated_ = 0;
}

HugePageArena& HugePageArena::operator=(HugePageArena&& other) noexcept {
  if (this != &other) {
    Release();
    slabs_ = std::move(other.slabs_);
    allocated_ = other.allocated_;
    other.slabs_.clear();
    other.allocated_ = 0;
  }
  return *this;
}

void HugePageArena::Release() {
  for (const Slab& s : slabs_) munmap(s.base, s.size);
  slabs_.clear();
}

uint8_t* HugePageArena::Allocate(size_t bytes) {
  bytes = RoundUp(bytes == 0 ? 1 : bytes, kAlign);
  allocated_ += bytes;
  if (bytes > kSlabBytes / 2) {
    // A large tensor (an LM head) gets a slab of its own, kept behind the current one so the
    // current one's free tail still serves the next small tensors.
    const size_t size = RoundUp(bytes, kHugePage);
    uint8_t* p = MapAligned(size);
    slabs_.insert(slabs_.empty() ? slabs_.end() : slabs_.end() - 1, {p, size, bytes});
    return p;
  }
  if (slabs_.empty() || slabs_.back().size - slabs_.back().used < bytes)
    slabs_.push_back({MapAligned(kSlabBytes), kSlabBytes, 0});
  Slab& s = slabs_.back();
  uint8_t* p = s.base + s.used;
  s.used += bytes;
  return p;
}

size_t HugePageArena::mapped_bytes() const {
  size_t n = 0;
  for (const Slab& s : slabs_) n += s.size;
  return n;
}

}  // namespace moeserve
