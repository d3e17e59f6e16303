// Element types of checkpoint tensors and of the engine's own buffers, with the conversions that
// every layer needs (bf16 <-> f32, fp16 -> f32, fp8 e4m3 -> f32).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace moeserve {

enum class DType : uint8_t { kF32, kBF16, kF16, kF8E4M3, kU8, kI32, kI64 };

// Bytes per element.
size_t DTypeSize(DType t);
// The safetensors spelling ("F32", "BF16", "F16", "F8_E4M3", "U8", "I32", "I64").
std::string_view DTypeName(DType t);
std::optional<DType> ParseDType(std::string_view safetensors_name);

// bfloat16 stored as its raw bits; arithmetic is done in f32.
struct bf16 {
  uint16_t bits;
};
static_assert(sizeof(bf16) == 2);

inline float Bf16ToF32(bf16 v) {
  uint32_t u = static_cast<uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round-to-nearest-even, as torch's .to(torch.bfloat16); NaN stays a quiet NaN.
inline bf16 F32ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<uint16_t>(u >> 16)};
}

// f32 -> bf16 -> f32: the value a bf16 tensor would hold.
inline float RoundToBf16(float f) {
  return Bf16ToF32(F32ToBf16(f));
}

float F16ToF32(uint16_t h);
// OCP float8 e4m3fn (torch.float8_e4m3fn): bias 7, no infinities, 0x7f/0xff are NaN.
float F8E4M3ToF32(uint8_t v);
uint8_t F32ToF8E4M3(float f);  // round-to-nearest-even, saturating to +-448

}  // namespace moeserve
