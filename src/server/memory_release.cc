#include "server/memory_release.h"

#include <malloc.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

namespace moeserve::server {

void ConfigureMallocForServing() {
#ifdef __GLIBC__
  if (!std::getenv("MALLOC_ARENA_MAX")) mallopt(M_ARENA_MAX, kMallocArenas);
  if (!std::getenv("MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, 128 << 10);
  if (!std::getenv("MALLOC_TRIM_THRESHOLD_")) mallopt(M_TRIM_THRESHOLD, 1 << 20);
#endif
}

ReleaseAfterLargeRequest::~ReleaseAfterLargeRequest() {
#ifdef __GLIBC__
  if (large_) malloc_trim(0);
#endif
}

void ReleaseUnusedStack() {
  // The lowest address of this thread's usable stack, looked up once per thread (0: unknown).
  thread_local const uintptr_t stack_low = [] {
    uintptr_t low = 0;
#ifdef __GLIBC__
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void* addr = nullptr;
      size_t size = 0, guard = 0;
      if (pthread_attr_getstack(&attr, &addr, &size) == 0 && addr != nullptr) {
        pthread_attr_getguardsize(&attr, &guard);
        low = reinterpret_cast<uintptr_t>(addr) + guard;
      }
      pthread_attr_destroy(&attr);
    }
#endif
    return low;
  }();
  if (stack_low == 0) return;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto frame = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  if (frame < stack_low + kStackKeepBytes + page) return;
  const uintptr_t begin = (stack_low + page - 1) / page * page;
  const uintptr_t end = (frame - kStackKeepBytes) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

bool IdleTrim::Due() {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t last = last_ns_.load(std::memory_order_relaxed);
  if (now - last < interval_ns_) return false;
  return last_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed);
}

void IdleTrim::Trim() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
  trims_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace moeserve::server
