// How a kernel sees a weight matrix: W[rows, cols] row-major, HF's [out_features, in_features].
// Quantized storage (FP8 block, MXFP4) extends this struct with its scale tensors; kernels dispatch
// on `dtype` once per call, never inside the inner loop.
#pragma once

#include <cstddef>

#include "core/dtype.h"

namespace moeserve::kernels {

struct WeightMatrix {
  DType dtype = DType::kBF16;  // kBF16 or kF32 for now
  const void* data = nullptr;  // element [r, c] at data + (r * row_stride + c) * DTypeSize(dtype)
  size_t rows = 0;             // N, output features
  size_t cols = 0;             // K, input features
  size_t row_stride = 0;       // elements between rows (>= cols); lets a TP shard view a slice

  bool empty() const { return data == nullptr; }
};

inline WeightMatrix Bf16Matrix(const bf16* data, size_t rows, size_t cols) {
  return {DType::kBF16, data, rows, cols, cols};
}
inline WeightMatrix F32Matrix(const float* data, size_t rows, size_t cols) {
  return {DType::kF32, data, rows, cols, cols};
}

}  // namespace moeserve::kernels
