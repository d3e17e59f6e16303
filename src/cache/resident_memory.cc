#include "cache/resident_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/check.h"

namespace moeserve::cache {
namespace {
constexpr size_t kPageBytes = 4096;
}

ResidentMemory::ResidentMemory(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw Error(
        detail::Concat("cannot map ", bytes, " bytes for the KV cache: ", std::strerror(errno)));
  data_ = static_cast<uint8_t*>(p);
  // Advice only: without THP (or with it off) the pages are plain 4 KiB ones.
  madvise(data_, bytes, MADV_HUGEPAGE);
  // Fault every page in now. MADV_POPULATE_WRITE (Linux 5.14) does it in one call and reports a
  // shortage as ENOMEM; older kernels reject the advice (EINVAL) and get one write per page.
#ifdef MADV_POPULATE_WRITE
  if (madvise(data_, bytes, MADV_POPULATE_WRITE) == 0) return;
  if (errno == ENOMEM || errno == EFAULT) {
    const int err = errno;
    munmap(data_, bytes);
    data_ = nullptr;
    throw Error(detail::Concat("cannot make ", bytes, " bytes of KV cache resident: ",
                               std::strerror(err), " (lower --kv-cache-memory)"));
  }
#endif
  for (size_t off = 0; off < bytes; off += kPageBytes) data_[off] = 0;
}

ResidentMemory::~ResidentMemory() {
  if (data_) munmap(data_, size_);
}

ResidentMemory::ResidentMemory(ResidentMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

ResidentMemory& ResidentMemory::operator=(ResidentMemory&& other) noexcept {
  if (this != &other) {
    if (data_) munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace moeserve::cache
