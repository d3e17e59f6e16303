// Writes one .safetensors file, streaming: the caller declares every tensor (name, dtype, shape)
// up front, the header goes out first, then each tensor's bytes are written when they are ready,
// so a checkpoint far larger than memory is written one tensor at a time.
//
// Layout (the format of loader/safetensors.h): u64 little-endian header length N, N bytes of
// compact JSON {"__metadata__": {...}, name: {"dtype", "shape", "data_offsets": [begin, end]}},
// padded with spaces to a multiple of 8, then the data buffer without holes. Tensors are placed
// widest element first, then by name, so with an 8-aligned buffer start every tensor is aligned
// to its element size (the same rule as tools/st_io.py, so both write byte-identical files).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace moeserve::loader {

struct TensorSpec {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;

  size_t NumBytes() const;
};

class SafetensorsWriter {
 public:
  // Creates (truncates) `path` and writes its header. Throws moeserve::Error naming the file on
  // an I/O error, a duplicate name, or a negative dimension.
  SafetensorsWriter(std::string path, std::vector<TensorSpec> specs,
                    const std::map<std::string, std::string>& metadata = {{"format", "pt"}});
  ~SafetensorsWriter();  // closes the file; an unfinished file is left incomplete on disk
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Tensor names in file order; writing in this order makes the file strictly sequential.
  const std::vector<std::string>& order() const { return order_; }

  // Writes the bytes of `name` (exactly its shape x dtype size). Tensors may come in any order,
  // each exactly once.
  void Write(const std::string& name, const void* data, size_t num_bytes);

  // Checks that every tensor was written, flushes and closes. Returns the file size in bytes.
  size_t Finish();

 private:
  struct Slot {
    size_t offset = 0;  // from the start of the file
    size_t num_bytes = 0;
    bool written = false;
  };

  std::string path_;
  std::FILE* file_ = nullptr;
  std::vector<std::string> order_;
  std::map<std::string, Slot> slots_;
  size_t file_bytes_ = 0;
  size_t position_ = 0;  // where the next fwrite lands
};

}  // namespace moeserve::loader
