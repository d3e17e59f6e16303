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
#pragma once

#include <cstddef>

namespace moeserve::server {

inline constexpr int kMallocArenas = 4;
// 64 KiB, not 1 MiB: the soak benchmark's bodies of 0.5-1 MiB (under a 1 MiB threshold, so never
// trimmed) kept +35 MB of idle RSS after 20 s (bench/soak/trim_gap.sh). A trim costs well under
// a millisecond against the work of a body that size.
inline constexpr size_t kLargeRequestBytes = 64u << 10;

void ConfigureMallocForServing();

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

}  // namespace moeserve::server
