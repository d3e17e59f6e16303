#include "server/memory_release.h"

#include <malloc.h>

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

}  // namespace moeserve::server
