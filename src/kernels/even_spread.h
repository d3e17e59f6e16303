// Items [0, total) handed out over `steps` calls in order, call s getting
// [s · total / steps, (s + 1) · total / steps), with no division per call: the AMX kernels spread
// the next block's prefetches over a pass's tile steps this way, where a 64-bit division per step
// (tens of cycles), or one per requested line as the FP8 tile kernel had, costs a fair share of a
// step's tile work.
#pragma once

#include <cstddef>

namespace moeserve::kernels {

class EvenSpread {
 public:
  EvenSpread() = default;
  // Positioned before call `first` of `steps` (two divisions, once per pass).
  EvenSpread(size_t total, size_t steps, size_t first)
      : quotient_(total / steps), remainder_(total % steps), steps_(steps) {
    // first · total / steps without overflow for the sizes used here (total, steps < 2^32).
    const size_t scaled = first * remainder_;
    begin_ = first * quotient_ + scaled / steps;
    carry_ = scaled % steps;
  }

  // Where the next call's range begins.
  size_t position() const { return begin_; }

  // The next call's range [begin, end).
  struct Range {
    size_t begin, end;
  };
  Range Next() {
    size_t end = begin_ + quotient_;
    carry_ += remainder_;
    if (carry_ >= steps_) {
      carry_ -= steps_;
      ++end;
    }
    const Range r{begin_, end};
    begin_ = end;
    return r;
  }

 private:
  size_t quotient_ = 0, remainder_ = 0, steps_ = 1;
  size_t begin_ = 0, carry_ = 0;
};

}  // namespace moeserve::kernels
