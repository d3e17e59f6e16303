// The one-token GEMVs' walk over rows (or panels, or row groups): the items as N runs of
// consecutive items read side by side, so that each thread's share is N long sequential streams,
// which the hardware prefetchers follow (README: decode GEMV streams).
#pragma once

#include <array>
#include <cstddef>

namespace moeserve::kernels {

// Items [first, first + n) as N runs of len = n / N items: fn(idx) for j < len with idx[g] =
// first + g · len + j. Returns the first item left for the caller (fewer than N of them).
template <int N, typename Fn>
inline size_t ForEachSideBySide(size_t first, size_t n, const Fn& fn) {
  const size_t len = n / N;
  for (size_t j = 0; j < len; ++j) {
    std::array<size_t, N> idx;
    for (int g = 0; g < N; ++g) idx[g] = first + g * len + j;
    fn(idx);
  }
  return first + N * len;
}

}  // namespace moeserve::kernels
