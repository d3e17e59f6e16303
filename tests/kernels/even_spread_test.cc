// EvenSpread hands out exactly the ranges [s · total / steps, (s + 1) · total / steps) of the
// division it avoids, from any starting call, and they tile [0, total).
#include "kernels/even_spread.h"

#include <gtest/gtest.h>

#include <cstddef>

namespace moeserve::kernels {
namespace {

TEST(EvenSpreadTest, RangesAreTheDivisionsFromAnyStart) {
  for (size_t total : {0, 1, 7, 64, 191, 512, 6144})
    for (size_t steps : {1, 2, 3, 32, 96, 480, 1000})
      for (size_t first : {size_t{0}, size_t{1}, steps / 2, steps - 1}) {
        EvenSpread spread(total, steps, first);
        EXPECT_EQ(spread.position(), first * total / steps);
        for (size_t s = first; s < steps; ++s) {
          const EvenSpread::Range r = spread.Next();
          ASSERT_EQ(r.begin, s * total / steps) << total << " over " << steps << ", call " << s;
          ASSERT_EQ(r.end, (s + 1) * total / steps) << total << " over " << steps << ", call " << s;
        }
        EXPECT_EQ(spread.position(), total);
      }
}

}  // namespace
}  // namespace moeserve::kernels
