// How a kernel sees a weight matrix: W[rows, cols] row-major, HF's [out_features, in_features].
// Quantized storage (FP8 block, MXFP4) carries its scale tensors; kernels dispatch on the format
// once per call, never inside the inner loop.
#pragma once

#include <cstddef>

#include "core/dtype.h"

namespace moeserve::kernels {

// Storage formats of a weight matrix.
//  kDense:    dtype kBF16 or kF32; element [r, c] at data + (r * row_stride + c) *
//  DTypeSize(dtype). kFp8Block: dtype kF8E4M3 (e4m3fn codes, 1 byte each, laid out as kDense); the
//  real value is
//             W[r, c] = e4m3(q[r, c]) * scales_f32[((row0 + r) / 128) * scale_stride + (col0 + c) /
//             128] (MiniMax-M2's weight_scale_inv: a multiplier despite its name). `scales` points
//             at the FULL scale tensor and (row0, col0) place this view inside the full weight, so
//             a tensor-parallel slice need not start on a 128 boundary.
//  kMxfp4:    dtype kU8; each byte holds two e2m1 codes, element 2i in the low nibble, 2i+1 in the
//             high nibble; row_stride counts BYTES between rows; data points at the byte of the
//             view's element [r=0, c=0]. Scales are e8m0 bytes, one per 32 consecutive columns:
//             W[r, c] = e2m1(code) * 2^(scales_u8[r * scale_stride + c / 32] - 127), with
//             `scales` pointing at the view's first group. Views start on a multiple of 32 columns.
//  kMxfp4I8:  MXFP4 repacked at load in 8-row groups for int8 dot products (mxfp4_i8.h); its
//             activations are quantized to int8 per 32-column block (--activation-dtype int8).
//  kBf16Panel: bf16 repacked at load in 16-row panels for the AVX2 kernels (bf16_panels.h); the
//             numerics of kDense bf16.
//  kFp8Panel: kFp8Block repacked at load in 16-row panels for the AVX2 kernels (fp8_panels.h).
enum class WeightFormat : uint8_t { kDense, kFp8Block, kMxfp4, kMxfp4I8, kBf16Panel, kFp8Panel };

struct WeightMatrix {
  DType dtype = DType::kBF16;
  const void* data = nullptr;
  size_t rows = 0;        // N, output features
  size_t cols = 0;        // K, input features
  size_t row_stride = 0;  // elements (bytes for kMxfp4) between rows; lets a TP shard view a slice
  WeightFormat format = WeightFormat::kDense;
  const void* scales = nullptr;  // see the formats above
  size_t scale_stride = 0;       // scale elements between scale rows
  size_t row0 = 0, col0 = 0;     // kFp8Block: the view's origin in the full weight

  bool empty() const { return data == nullptr; }
};

inline WeightMatrix Bf16Matrix(const bf16* data, size_t rows, size_t cols) {
  return {DType::kBF16, data, rows, cols, cols, WeightFormat::kDense, nullptr, 0, 0, 0};
}
inline WeightMatrix F32Matrix(const float* data, size_t rows, size_t cols) {
  return {DType::kF32, data, rows, cols, cols, WeightFormat::kDense, nullptr, 0, 0, 0};
}

}  // namespace moeserve::kernels
