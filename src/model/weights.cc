#include "model/weights.h"

#include "core/check.h"

#include <cstring>

namespace moeserve::model {

std::pair<size_t, size_t> SplitRange(size_t n, Shard shard) {
  const size_t parts = static_cast<size_t>(shard.size), r = static_cast<size_t>(shard.rank);
  const size_t base = n / parts, extra = n % parts;
  const size_t begin = r * base + std::min(r, extra);
  return {begin, begin + base + (r < extra ? 1 : 0)};
}

kernels::WeightMatrix WeightReader::Linear(const std::string& name, size_t out, size_t in) {
  return Linear(name, out, in, Slice2D{0, out, 0, in});
}

kernels::WeightMatrix WeightReader::Linear(const std::string& name, size_t out, size_t in,
                                           Slice2D s) {
  const auto& t = loader_.Take(name, {static_cast<int64_t>(out), static_cast<int64_t>(in)},
                               {DType::kBF16});
  MOESERVE_CHECK(s.row_end <= out && s.col_end <= in && s.row_begin <= s.row_end &&
                     s.col_begin <= s.col_end,
                 name);
  kernels::WeightMatrix w;
  w.dtype = DType::kBF16;
  w.data = reinterpret_cast<const bf16*>(t.data) + s.row_begin * in + s.col_begin;
  w.rows = s.row_end - s.row_begin;
  w.cols = s.col_end - s.col_begin;
  w.row_stride = in;
  bytes_mapped_ += w.rows * w.cols * sizeof(bf16);
  return w;
}

void WeightReader::CheckLinear(const std::string& name, size_t out, size_t in) {
  loader_.Take(name, {static_cast<int64_t>(out), static_cast<int64_t>(in)}, {DType::kBF16});
}

namespace {
float ElementAsF32(const loader::TensorInfo& t, size_t i) {
  switch (t.dtype) {
    case DType::kF32: {
      float v;
      std::memcpy(&v, t.data + i * 4, 4);
      return v;
    }
    case DType::kBF16: {
      bf16 v;
      std::memcpy(&v, t.data + i * 2, 2);
      return Bf16ToF32(v);
    }
    default:
      MOESERVE_CHECK(false, "unexpected dtype for ", t.name);
  }
  return 0;
}
}  // namespace

std::vector<float> WeightReader::Vector(const std::string& name, size_t n) {
  return Vector(name, n, 0, n);
}

std::vector<float> WeightReader::Vector(const std::string& name, size_t n, size_t begin,
                                        size_t end) {
  const auto& t = loader_.Take(name, {static_cast<int64_t>(n)}, {DType::kBF16, DType::kF32});
  MOESERVE_CHECK(begin <= end && end <= n, name);
  std::vector<float> v(end - begin);
  for (size_t i = begin; i < end; ++i) v[i - begin] = ElementAsF32(t, i);
  bytes_mapped_ += (end - begin) * DTypeSize(t.dtype);
  return v;
}

std::vector<float> WeightReader::MatrixF32(const std::string& name, size_t rows, size_t cols) {
  const auto& t = loader_.Take(name, {static_cast<int64_t>(rows), static_cast<int64_t>(cols)},
                               {DType::kBF16, DType::kF32});
  std::vector<float> v(rows * cols);
  for (size_t i = 0; i < v.size(); ++i) v[i] = ElementAsF32(t, i);
  bytes_mapped_ += t.num_bytes;
  return v;
}

}  // namespace moeserve::model
