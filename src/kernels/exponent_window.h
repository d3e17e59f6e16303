// Which MXFP4 × Q8 blocks may form their scale dw · h by adding exponents (the AVX-512 kernel of
// mxfp4_i8.h; tried in the AVX2 kernel's buffered path too, where on Zen 4 it measured within
// noise of the multiply, 202-205 vs 203-209 GOP/s on one core at 512 tokens, so it is not there).
//
// dw = 2^(e − 127) is a power of two, so for a normal f32 h whose product with dw stays normal,
// dw · h is h's bits plus (e − 127) << 23, exactly the reference's multiply. The integer add can
// run on any vector pipe, where the vmulps competes with the dot products and the fmadd (Zen 4:
// 2.9 vs 3.25 ns per 16 rows × 32 columns per token in a microbenchmark of the AVX-512 step).
// A kernel takes that path for a block when each of its rows' e lies in [lo, hi], the range that
// keeps every product of a run of tokens normal; other blocks use the multiply.
//
// An all-zero activation block (h = 0: q = 0 and the offset c = 0, so the dot S = 0) is given
// h's bits as 1.0f (ShiftableBits): the product 0 · dw is +0 either way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace moeserve::kernels {

// The bits a kernel adds the weight exponent to: h's, or 1.0f's for h = 0.
inline int32_t ShiftableBits(float h) {
  const float v = h == 0.0f ? 1.0f : h;
  int32_t bits;
  std::memcpy(&bits, &v, 4);
  return bits;
}

struct ExponentWindow {
  int lo = 255, hi = 0;  // empty: no block qualifies

  // From the ShiftableBits of every h of a run; a subnormal, infinite or NaN h empties it.
  static ExponentWindow Of(const int32_t* bits, size_t n) {
    int min_e = 255, max_e = 0;
    for (size_t i = 0; i < n; ++i) {
      const int e = (bits[i] >> 23) & 0xff;
      if (e == 0 || e == 255) return {};
      min_e = e < min_e ? e : min_e;
      max_e = e > max_e ? e : max_e;
    }
    if (n == 0) return {};
    // e_h + e_w − 127 must stay in [1, 254] for every h; e_w = 0 (2^-127, not a normal) and
    // 255 (NaN) are excluded too.
    const int lo = 128 - min_e > 1 ? 128 - min_e : 1, hi = 381 - max_e < 254 ? 381 - max_e : 254;
    return lo <= hi ? ExponentWindow{lo, hi} : ExponentWindow{};
  }
};

}  // namespace moeserve::kernels
