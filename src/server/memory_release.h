// Memory that comes back after large requests. glibc malloc gives every thread that allocates
// under contention its own arena (up to 8 per core) and keeps each arena's peak: a 5 MB request
// body parsed on a new connection's thread left ~200 MB resident for good (issue 14). So:
//  - ConfigureMallocForServing (once, at startup, before threads): at most kMallocArenas arenas,
//    a fixed mmap threshold (blocks of 128 KiB and more are mapped and unmapped, instead of the
//    threshold creeping up to 32 MiB after each large free) and a 1 MiB trim threshold. The glibc
//    environment variables (MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_)
//    still win when set.
//  - ReleaseAfterLargeRequest: a request whose body is at least kLargeRequestBytes calls
//    malloc_trim when its handler ends, which hands the free pages of every arena back to the
//    system (the parsed JSON of a large body is millions of small blocks).
//  - ReleaseUnusedStack after every handler on the HTTP worker pool: the thread's stack pages
//    below the current frame go back to the system. The pool has up to max-num-seqs + 8
//    threads (264 by default) and each kept its deepest handler frames (JSON parsing, template
//    rendering) resident. (The pool no longer rotates over all of them: worker_pool.h.)
//  - IdleTrim: when the last request ends, malloc_trim on a worker thread, so that the free
//    pages of every arena go back while the server idles.
// The moeserve executable is linked with jemalloc by default (MOESERVE_MALLOC in CMakeLists.txt;
// AllocatorName says which one runs). Then the same calls purge jemalloc's arenas instead of
// trimming glibc's, and ConfigureMallocForServing turns on its background purging. Why: the soak's
// remaining idle RSS creep with glibc was per-thread memory malloc counts as in use (the tcache of
// each handler thread, ~55 KB each, growing as threads meet larger requests), which no glibc call
// returns; jemalloc's thread caches can be flushed (ReleaseThreadCache) and its freed pages decay
// back to the system on their own (README "Soak").
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace moeserve::server {

inline constexpr int kMallocArenas = 4;
// jemalloc (when linked): pages freed this long ago go back to the system, by a background thread.
inline constexpr int kJemallocDecayMs = 1000;
// 64 KiB, not 1 MiB: the soak benchmark's bodies of 0.5-1 MiB (under a 1 MiB threshold, so never
// trimmed) kept +35 MB of idle RSS after 20 s (bench/soak/trim_gap.sh). A trim costs well under
// a millisecond against the work of a body that size.
inline constexpr size_t kLargeRequestBytes = 64u << 10;

void ConfigureMallocForServing();
// The allocator behind malloc in this process: "jemalloc" or "glibc malloc".
const char* AllocatorName();

// Scoped: declare it first in a handler so it runs after every other local is destroyed.
class ReleaseAfterLargeRequest {
 public:
  explicit ReleaseAfterLargeRequest(size_t body_bytes) : large_(body_bytes >= kLargeRequestBytes) {}
  ~ReleaseAfterLargeRequest();
  ReleaseAfterLargeRequest(const ReleaseAfterLargeRequest&) = delete;
  ReleaseAfterLargeRequest& operator=(const ReleaseAfterLargeRequest&) = delete;

 private:
  bool large_;
};

// The calling thread's cache of freed blocks goes back to the shared arenas, where the purges
// above can return it (jemalloc's thread.tcache.flush; nothing with glibc, whose tcache has no
// such call). For a pool thread about to idle (WorkerPool's on_idle): jemalloc's caches of the
// soak's ~45 idle handler threads held 10-13 MB.
void ReleaseThreadCache();

// Hands back the calling thread's stack pages more than kStackKeepBytes below the current frame
// (MADV_DONTNEED: the next deeper call gets fresh zero pages). For threads created with
// std::thread / pthreads; a no-op where the stack bounds are unknown.
inline constexpr size_t kStackKeepBytes = 16u << 10;
void ReleaseUnusedStack();

// malloc_trim when the server goes idle (its last request of any kind, stream or not, has ended
// and freed its state), at most once per `interval`: the rate limit bounds the cost for a stream
// of tiny sequential requests. Due() decides (thread-safe, cheap); Trim() does the work and
// belongs on a worker thread, not the I/O thread.
class IdleTrim {
 public:
  explicit IdleTrim(std::chrono::milliseconds interval = std::chrono::milliseconds(20))
      : interval_ns_(std::chrono::nanoseconds(interval).count()) {}
  bool Due();
  void Trim();
  size_t trims() const { return trims_.load(std::memory_order_relaxed); }

 private:
  const int64_t interval_ns_;
  std::atomic<int64_t> last_ns_{INT64_MIN / 2};
  std::atomic<size_t> trims_{0};
};

}  // namespace moeserve::server
