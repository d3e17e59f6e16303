#include "server/memory_release.h"

#include <malloc.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

// jemalloc's control interface, there when the binary is linked with it (MOESERVE_MALLOC in
// CMakeLists.txt links the moeserve executable only). Weak, so that the libraries, the tests and
// the sanitizer builds link without it and take the glibc path.
extern "C" int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen)
    __attribute__((weak));

namespace moeserve::server {
namespace {

bool HaveJemalloc() {
  return mallctl != nullptr;
}

// jemalloc.h's MALLCTL_ARENAS_ALL (4096): "arena.<i>.*" applies to every arena.
constexpr const char* kJemallocPurgeAll = "arena.4096.purge";

// Gives free memory back: jemalloc purges the dirty pages of every arena (after flushing the
// calling thread's cache into them); glibc trims every arena.
void ReleaseFreeMemory() {
  if (HaveJemalloc()) {
    mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0);
    mallctl(kJemallocPurgeAll, nullptr, nullptr, nullptr, 0);
    return;
  }
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

}  // namespace

void ReleaseThreadCache() {
  if (HaveJemalloc()) mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0);
}

const char* AllocatorName() {
  return HaveJemalloc() ? "jemalloc" : "glibc malloc";
}

void ConfigureMallocForServing() {
  if (HaveJemalloc()) {
    // Freed pages go back to the system on their own: a background thread purges the pages freed
    // more than kJemallocDecayMs ago (jemalloc's default waits 10 s), without going through the
    // MADV_FREE ("muzzy") stage whose pages still count in the RSS. MALLOC_CONF wins when set.
    if (std::getenv("MALLOC_CONF")) return;
    bool on = true;
    mallctl("background_thread", nullptr, nullptr, &on, sizeof(on));
    ssize_t dirty = kJemallocDecayMs, muzzy = 0;
    mallctl("arenas.dirty_decay_ms", nullptr, nullptr, &dirty, sizeof(dirty));
    mallctl("arenas.muzzy_decay_ms", nullptr, nullptr, &muzzy, sizeof(muzzy));
    // The arenas that exist already (arenas.* sets the default for new ones).
    unsigned narenas = 0;
    size_t len = sizeof(narenas);
    if (mallctl("arenas.narenas", &narenas, &len, nullptr, 0) == 0) {
      for (unsigned i = 0; i < narenas; ++i) {
        const std::string a = "arena." + std::to_string(i);
        mallctl((a + ".dirty_decay_ms").c_str(), nullptr, nullptr, &dirty, sizeof(dirty));
        mallctl((a + ".muzzy_decay_ms").c_str(), nullptr, nullptr, &muzzy, sizeof(muzzy));
      }
    }
    return;
  }
#ifdef __GLIBC__
  if (!std::getenv("MALLOC_ARENA_MAX")) mallopt(M_ARENA_MAX, kMallocArenas);
  if (!std::getenv("MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, 128 << 10);
  if (!std::getenv("MALLOC_TRIM_THRESHOLD_")) mallopt(M_TRIM_THRESHOLD, 1 << 20);
#endif
}

ReleaseAfterLargeRequest::~ReleaseAfterLargeRequest() {
  if (large_) ReleaseFreeMemory();
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
  ReleaseFreeMemory();
  trims_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace moeserve::server
