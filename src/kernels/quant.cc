#include "kernels/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "kernels/bf16_panels.h"
#include "kernels/fp8_panels.h"
#include "kernels/mxfp4_i8.h"

namespace moeserve::kernels {
namespace {

constexpr size_t kFp8Block = 128;
constexpr size_t kMxGroup = 32;

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

constexpr float kE2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

}  // namespace

float E4M3ToFloat(uint8_t code) {
  return F8E4M3ToF32(code);
}

uint8_t FloatToE4M3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const float a = std::fabs(f);
  if (a >= 448.0f) return sign | 0x7e;
  if (a < 0.015625f) {  // below 2^-6 the codes are subnormal: steps of 2^-9
    // a · 512 is exact; adding and removing 2^23 rounds it to an integer, ties to even.
    const float q = (a * 512.0f + 8388608.0f) - 8388608.0f;
    return sign | static_cast<uint8_t>(q);  // q = 8 is code 8 = 2^-6, the first normal
  }
  // Round the f32 mantissa to 3 bits, ties to even; a carry moves into the exponent by itself.
  uint32_t u = Bits(a);
  u += 0x7ffffu + ((u >> 20) & 1u);
  const uint32_t exp = (u >> 23) - 120, mant = (u >> 20) & 7u;  // e4m3 bias 7 = 127 − 120
  const uint32_t code = (exp << 3) | mant;
  return sign | static_cast<uint8_t>(code > 0x7e ? 0x7e : code);
}

float E2M1ToFloat(uint8_t nibble) {
  const float v = kE2M1[nibble & 7];
  return (nibble & 8) ? -v : v;
}

uint8_t FloatToE2M1(float f) {
  const uint8_t sign = std::signbit(f) ? 8 : 0;
  const float a = std::fabs(f);
  if (std::isnan(f)) return 7;
  uint8_t c;
  if (a <= 0.25f)
    c = 0;
  else if (a < 0.75f)
    c = 1;
  else if (a <= 1.25f)
    c = 2;
  else if (a < 1.75f)
    c = 3;
  else if (a <= 2.5f)
    c = 4;
  else if (a < 3.5f)
    c = 5;
  else if (a <= 5.0f)
    c = 6;
  else
    c = 7;
  return sign | c;
}

float E8M0ToFloat(uint8_t e) {
  if (e == 255) return NAN;
  if (e == 0) return FromBits(0x00400000u);  // 2^-127, subnormal
  return FromBits(uint32_t{e} << 23);
}

void QuantizeFp8Block(const float* w, size_t rows, size_t cols, uint8_t* q, float* scale_inv) {
  const size_t rb_count = (rows + kFp8Block - 1) / kFp8Block;
  const size_t cb_count = (cols + kFp8Block - 1) / kFp8Block;
  for (size_t rb = 0; rb < rb_count; ++rb) {
    const size_t r0 = rb * kFp8Block, r1 = std::min(rows, r0 + kFp8Block);
    for (size_t cb = 0; cb < cb_count; ++cb) {
      const size_t c0 = cb * kFp8Block, c1 = std::min(cols, c0 + kFp8Block);
      float amax = 0;
      for (size_t r = r0; r < r1; ++r)
        for (size_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      const float scale = amax == 0.0f ? 1.0f : amax / 448.0f;
      scale_inv[rb * cb_count + cb] = scale;
      for (size_t r = r0; r < r1; ++r)
        for (size_t c = c0; c < c1; ++c) q[r * cols + c] = FloatToE4M3(w[r * cols + c] / scale);
    }
  }
}

void QuantizeMxfp4(const float* w, size_t rows, size_t cols, uint8_t* packed,
                   uint8_t* scales_e8m0) {
  MOESERVE_CHECK(cols % kMxGroup == 0, "QuantizeMxfp4: cols ", cols, " not a multiple of 32");
  const size_t groups = cols / kMxGroup;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t g = 0; g < groups; ++g) {
      const float* v = w + r * cols + g * kMxGroup;
      float amax = 0;
      for (size_t i = 0; i < kMxGroup; ++i) amax = std::max(amax, std::fabs(v[i]));
      int exp = 0;
      if (amax > 0.0f) {
        int e2;
        std::frexp(amax, &e2);  // amax = f · 2^e2, f in [0.5, 1): floor(log2(amax)) = e2 − 1
        exp = std::clamp(e2 - 1 - 2, -127, 127);
      }
      scales_e8m0[r * groups + g] = static_cast<uint8_t>(exp + 127);
      uint8_t* out = packed + r * cols / 2 + g * kMxGroup / 2;
      for (size_t i = 0; i < kMxGroup; i += 2) {
        const uint8_t lo = FloatToE2M1(std::ldexp(v[i], -exp));
        const uint8_t hi = FloatToE2M1(std::ldexp(v[i + 1], -exp));
        out[i / 2] = static_cast<uint8_t>(lo | (hi << 4));
      }
    }
  }
}

void DequantizeRow(const WeightMatrix& w, size_t row, size_t c0, size_t n, float* out) {
  switch (w.format) {
    case WeightFormat::kDense:
      if (w.dtype == DType::kBF16) {
        const bf16* p = static_cast<const bf16*>(w.data) + row * w.row_stride + c0;
        for (size_t i = 0; i < n; ++i) out[i] = Bf16ToF32(p[i]);
      } else {
        MOESERVE_CHECK(w.dtype == DType::kF32, "DequantizeRow: dtype ", DTypeName(w.dtype));
        std::memcpy(out, static_cast<const float*>(w.data) + row * w.row_stride + c0,
                    n * sizeof(float));
      }
      return;
    case WeightFormat::kFp8Block: {
      const uint8_t* p = static_cast<const uint8_t*>(w.data) + row * w.row_stride;
      const float* s =
          static_cast<const float*>(w.scales) + ((w.row0 + row) / kFp8Block) * w.scale_stride;
      for (size_t i = 0; i < n; ++i) {
        const size_t c = c0 + i;
        out[i] = E4M3ToFloat(p[c]) * s[(w.col0 + c) / kFp8Block];
      }
      return;
    }
    case WeightFormat::kMxfp4: {
      const uint8_t* p = static_cast<const uint8_t*>(w.data) + row * w.row_stride;
      const uint8_t* s = static_cast<const uint8_t*>(w.scales) + row * w.scale_stride;
      for (size_t i = 0; i < n; ++i) {
        const size_t c = c0 + i;
        const uint8_t nib = (p[c / 2] >> ((c & 1) * 4)) & 0xf;
        out[i] = E2M1ToFloat(nib) * E8M0ToFloat(s[c / kMxGroup]);
      }
      return;
    }
    case WeightFormat::kMxfp4I8:
      for (size_t i = 0; i < n; ++i) out[i] = Mxfp4I8Element(w, row, c0 + i);
      return;
    case WeightFormat::kBf16Panel:
      for (size_t i = 0; i < n; ++i) out[i] = Bf16ToF32(Bf16PanelElement(w, row, c0 + i));
      return;
    case WeightFormat::kFp8Panel:
      for (size_t i = 0; i < n; ++i) out[i] = Fp8PanelElement(w, row, c0 + i);
      return;
  }
}

void DequantizeToF32(const WeightMatrix& w, float* out, size_t ld_out) {
  for (size_t r = 0; r < w.rows; ++r) DequantizeRow(w, r, 0, w.cols, out + r * ld_out);
}

size_t KvBlockBytesFp8(size_t block_size, size_t num_kv_heads, size_t head_dim) {
  return KvScaleOffsetFp8(block_size, num_kv_heads, head_dim) +
         block_size * num_kv_heads * sizeof(float);
}

void QuantizeKvRowFp8(const float* x, size_t num_kv_heads, size_t head_dim, uint8_t* codes,
                      float* scales) {
  for (size_t g = 0; g < num_kv_heads; ++g) {
    const float* v = x + g * head_dim;
    float amax = 0;
    for (size_t j = 0; j < head_dim; ++j) amax = std::max(amax, std::fabs(v[j]));
    const float scale = amax == 0.0f ? 1.0f : amax / 448.0f;
    scales[g] = scale;
    for (size_t j = 0; j < head_dim; ++j) codes[g * head_dim + j] = FloatToE4M3(v[j] / scale);
  }
}

void WriteKvRowFp8(const float* x, size_t num_kv_heads, size_t head_dim, size_t block_size,
                   size_t row, uint8_t* block) {
  MOESERVE_CHECK(row < block_size, "row ", row, " of block_size ", block_size);
  float scales[64];
  float* s = scales;
  std::vector<float> big;
  if (num_kv_heads > 64) {
    big.resize(num_kv_heads);
    s = big.data();
  }
  QuantizeKvRowFp8(x, num_kv_heads, head_dim, block + row * num_kv_heads * head_dim, s);
  std::memcpy(block + KvScaleOffsetFp8(block_size, num_kv_heads, head_dim) +
                  row * num_kv_heads * sizeof(float),
              s, num_kv_heads * sizeof(float));
}

}  // namespace moeserve::kernels
