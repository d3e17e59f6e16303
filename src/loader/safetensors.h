// One .safetensors file, memory-mapped read-only. Only the pages of tensors actually used become
// resident, so a tensor-parallel rank that reads only its slices keeps only those in RAM.
//
// Format: u64 little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets:
// [begin, end]}, "__metadata__": {...}}, then the data; offsets are relative to the end of the
// header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace moeserve::loader {

struct TensorInfo {
  std::string name;
  std::string file;  // path of the file it lives in (for error messages)
  DType dtype;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t num_bytes = 0;

  size_t NumElements() const;
};

std::string ShapeString(const std::vector<int64_t>& shape);

class SafetensorsFile {
 public:
  // Throws moeserve::Error naming the file (and the tensor) on: unreadable file, header length
  // beyond the file, invalid JSON, unknown dtype, offsets that disagree with shape x dtype,
  // overlapping or out-of-file data (a truncated download).
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::map<std::string, TensorInfo> tensors_;
};

}  // namespace moeserve::loader
