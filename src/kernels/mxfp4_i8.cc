#include "kernels/mxfp4_i8.h"

#include <cmath>
#include <cstring>

#include "core/check.h"
#include "kernels/quant.h"

namespace moeserve::kernels {
namespace {

constexpr size_t kBlock = kMxfp4I8Block;  // columns per e8m0 scale and per Q8 activation block
constexpr size_t kGroupRows = kMxfp4I8GroupRows;             // rows per repacked group
constexpr size_t kBlockCodeBytes = kGroupRows * kBlock / 2;  // 128: 4 chunks of 32 bytes

size_t Groups(size_t rows) {
  return (rows + kGroupRows - 1) / kGroupRows;
}

// Where element (r, c) of a kMxfp4I8 view lives: its code byte, the nibble's shift, its scale.
struct I8Position {
  const uint8_t* byte;
  int shift;
  uint8_t scale;
};

I8Position Locate(const WeightMatrix& w, size_t r, size_t c) {
  const size_t g = r / kGroupRows, rr = r % kGroupRows, b = c / kBlock, cc = c % kBlock;
  const size_t chunk = cc / 8, j = cc % 8;
  const uint8_t* codes = static_cast<const uint8_t*>(w.data) + g * w.row_stride;
  const uint8_t* scales = static_cast<const uint8_t*>(w.scales) + g * w.scale_stride;
  return {codes + b * kBlockCodeBytes + chunk * 32 + 4 * rr + (j % 4), j < 4 ? 0 : 4,
          scales[b * kGroupRows + rr]};
}

// 2 · e2m1(code): the exact small integer the int8 dot products use (0, ±1, ... ±12).
int TwiceE2M1(uint8_t code) {
  return static_cast<int>(2.0f * E2M1ToFloat(code));
}

// Round half to even, as the SIMD paths do. clang 14 has no __builtin_roundevenf; nearbyint rounds
// the same way in the default rounding mode.
inline float RoundEven(float x) {
#if __has_builtin(__builtin_roundevenf)
  return __builtin_roundevenf(x);
#else
  return std::nearbyint(x);
#endif
}

}  // namespace

void QuantizeRowQ8Reference(const float* x, size_t k, int8_t* q, float* d, int32_t* sum) {
  MOESERVE_CHECK(k % kBlock == 0, "QuantizeRowQ8: k ", k, " not a multiple of 32");
  for (size_t b = 0; b < k / kBlock; ++b) {
    const float* v = x + b * kBlock;
    float amax = 0.0f;
    for (size_t i = 0; i < kBlock; ++i) amax = std::fmax(amax, std::fabs(v[i]));
    const float scale = amax / 127.0f;
    d[b] = scale;
    int32_t s = 0;
    for (size_t i = 0; i < kBlock; ++i) {
      // scale == 0 also when a subnormal amax underflows in the division: the block is then
      // zeros to int8 precision, and x / 0 would be ±inf or NaN.
      float r = scale == 0.0f ? 0.0f : RoundEven(v[i] / scale);
      r = r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : r);
      q[b * kBlock + i] = static_cast<int8_t>(r);
      s += q[b * kBlock + i];
    }
    sum[b] = s;
  }
}

size_t Mxfp4I8CodeBytes(size_t rows, size_t cols) {
  return Groups(rows) * (cols / kBlock) * kBlockCodeBytes;
}

size_t Mxfp4I8ScaleBytes(size_t rows, size_t cols) {
  return Groups(rows) * (cols / kBlock) * kGroupRows;
}

WeightMatrix RepackMxfp4I8(const WeightMatrix& mxfp4, uint8_t* codes, uint8_t* scales) {
  const WeightMatrix& w = mxfp4;
  MOESERVE_CHECK(w.format == WeightFormat::kMxfp4 && w.dtype == DType::kU8,
                 "RepackMxfp4I8: not an MXFP4 view");
  MOESERVE_CHECK(w.cols % kBlock == 0, "RepackMxfp4I8: cols ", w.cols, " not a multiple of 32");
  MOESERVE_CHECK(w.row_stride >= w.cols / 2 && w.scale_stride >= w.cols / kBlock,
                 "RepackMxfp4I8: row_stride ", w.row_stride, " or scale_stride ", w.scale_stride,
                 " too small for ", w.cols, " columns");
  const size_t blocks = w.cols / kBlock;
  // Padding rows: code 0 (+0) and scale 127 (1.0), so they add exact zeros and no NaN.
  if (w.rows % kGroupRows != 0) {
    std::memset(codes, 0, Mxfp4I8CodeBytes(w.rows, w.cols));
    std::memset(scales, 127, Mxfp4I8ScaleBytes(w.rows, w.cols));
  }
  const auto* src = static_cast<const uint8_t*>(w.data);
  const auto* src_scales = static_cast<const uint8_t*>(w.scales);
  // Each output byte written once, straight from its two source nibbles (this runs over every
  // MXFP4 weight at load: a 4 GB checkpoint took 22 s with read-modify-write of each nibble).
  auto nibble = [](const uint8_t* in, size_t col) {
    return (in[col / 2] >> (4 * (col % 2))) & 0xf;
  };
  for (size_t r = 0; r < w.rows; ++r) {
    const size_t g = r / kGroupRows, rr = r % kGroupRows;
    const uint8_t* row = src + r * w.row_stride;
    for (size_t b = 0; b < blocks; ++b) {
      uint8_t* out = codes + (g * blocks + b) * kBlockCodeBytes + 4 * rr;
      // Source byte i of the block holds columns 2i (low) and 2i + 1 (high); chunk c's byte j
      // holds columns 8c + j (low) and 8c + 4 + j (high).
      const uint8_t* in = row + b * kBlock / 2;
      for (size_t c = 0; c < 4; ++c)
        for (size_t j = 0; j < 4; ++j)
          out[c * 32 + j] =
              static_cast<uint8_t>(nibble(in, 8 * c + j) | nibble(in, 8 * c + 4 + j) << 4);
      scales[(g * blocks + b) * kGroupRows + rr] = src_scales[r * w.scale_stride + b];
    }
  }
  WeightMatrix out = w;
  out.format = WeightFormat::kMxfp4I8;
  out.data = codes;
  out.scales = scales;
  out.row_stride = blocks * kBlockCodeBytes;
  out.scale_stride = blocks * kGroupRows;
  out.row0 = out.col0 = 0;
  return out;
}

WeightMatrix Mxfp4I8Rows(const WeightMatrix& w, size_t n0, size_t n) {
  MOESERVE_CHECK(w.format == WeightFormat::kMxfp4I8, "Mxfp4I8Rows: not a kMxfp4I8 view");
  MOESERVE_CHECK(n0 % kGroupRows == 0 && n0 + n <= w.rows, "Mxfp4I8Rows: rows [", n0, ", ", n0 + n,
                 ") of ", w.rows, " (must start on a multiple of 8)");
  WeightMatrix out = w;
  out.data = static_cast<const uint8_t*>(w.data) + n0 / kGroupRows * w.row_stride;
  out.scales = static_cast<const uint8_t*>(w.scales) + n0 / kGroupRows * w.scale_stride;
  out.rows = n;
  return out;
}

float Mxfp4I8Element(const WeightMatrix& w, size_t r, size_t c) {
  const I8Position p = Locate(w, r, c);
  return E2M1ToFloat((*p.byte >> p.shift) & 0xf) * E8M0ToFloat(p.scale);
}

void MatMulMxfp4I8Reference(const Q8Rows& x, const WeightMatrix& w, float* y, size_t ldy,
                            bool accumulate) {
  MOESERVE_CHECK(w.format == WeightFormat::kMxfp4I8, "MatMulMxfp4I8: not a kMxfp4I8 view");
  MOESERVE_CHECK(x.k == w.cols && x.k % kBlock == 0, "MatMulMxfp4I8: x has ", x.k, " columns, W ",
                 w.cols);
  for (size_t t = 0; t < x.m; ++t) {
    const int8_t* q = x.q + t * x.ldq;
    const float* d = x.d + t * x.ldd;
    for (size_t r = 0; r < w.rows; ++r) {
      float acc = 0.0f;
      for (size_t b = 0; b < x.k / kBlock; ++b) {
        int32_t s = 0;
        for (size_t i = 0; i < kBlock; ++i) {
          const I8Position p = Locate(w, r, b * kBlock + i);
          s += TwiceE2M1((*p.byte >> p.shift) & 0xf) * q[b * kBlock + i];
        }
        const float dw = E8M0ToFloat(Locate(w, r, b * kBlock).scale);
        acc = std::fmaf(static_cast<float>(s), dw * (0.5f * d[b]), acc);
      }
      float& out = y[t * ldy + r];
      out = accumulate ? out + acc : acc;
    }
  }
}

}  // namespace moeserve::kernels
