// A kernel's rows in passes of at most six, each pass's row count a compile-time constant (its
// accumulators are arrays of that many rows), written once for the attention tiles' direct P·V
// (AVX2 and AVX-512, bf16 and FP8 caches) and the AVX-512 decode scores from K rows instead of a
// loop and a six-case switch in each.
#pragma once

#include <cstddef>
#include <type_traits>

namespace moeserve::kernels {

// pass(std::integral_constant<int, R>{}, r) runs rows [r, r + R); the passes cover [0, n), six
// rows each but the last.
template <typename Pass>
inline void ForRowPassesOfSix(size_t n, const Pass& pass) {
  size_t r = 0;
  for (; n - r > 6; r += 6) pass(std::integral_constant<int, 6>{}, r);
  switch (n - r) {
    case 1:
      return pass(std::integral_constant<int, 1>{}, r);
    case 2:
      return pass(std::integral_constant<int, 2>{}, r);
    case 3:
      return pass(std::integral_constant<int, 3>{}, r);
    case 4:
      return pass(std::integral_constant<int, 4>{}, r);
    case 5:
      return pass(std::integral_constant<int, 5>{}, r);
    case 6:
      return pass(std::integral_constant<int, 6>{}, r);
  }
}

}  // namespace moeserve::kernels
