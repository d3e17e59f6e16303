#include "loader/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/check.h"

namespace moeserve::loader {

size_t TensorInfo::NumElements() const {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) Fail("cannot open checkpoint file ", path, ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    Fail("cannot stat ", path, ": ", std::strerror(errno));
  }
  map_size_ = static_cast<size_t>(st.st_size);
  if (map_size_ < 8) {
    ::close(fd);
    Fail(path, ": file is ", map_size_, " bytes, too short for a safetensors header");
  }
  map_ = ::mmap(nullptr, map_size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    Fail("cannot mmap ", path, ": ", std::strerror(errno));
  }
  const auto* bytes = static_cast<const uint8_t*>(map_);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > map_size_ - 8)
    Fail(path, ": corrupt header: header length ", header_len, " exceeds the file size ",
         map_size_);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes + 8, bytes + 8 + header_len);
  } catch (const nlohmann::json::exception& e) {
    Fail(path, ": corrupt header: invalid JSON: ", e.what());
  }
  if (!header.is_object()) Fail(path, ": corrupt header: not a JSON object");
  const uint8_t* data_start = bytes + 8 + header_len;
  const size_t data_size = map_size_ - 8 - header_len;
  std::vector<std::pair<size_t, size_t>> ranges;
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    TensorInfo t;
    t.name = name;
    t.file = path;
    try {
      const std::string dtype = entry.at("dtype").get<std::string>();
      auto parsed = ParseDType(dtype);
      if (!parsed) Fail(path, ": tensor ", name, ": unsupported dtype ", dtype);
      t.dtype = *parsed;
      t.shape = entry.at("shape").get<std::vector<int64_t>>();
      auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1])
        Fail(path, ": tensor ", name, ": invalid data_offsets");
      for (int64_t d : t.shape)
        if (d < 0) Fail(path, ": tensor ", name, ": negative dimension in shape");
      t.num_bytes = offsets[1] - offsets[0];
      if (t.num_bytes != t.NumElements() * DTypeSize(t.dtype))
        Fail(path, ": tensor ", name, ": data_offsets span ", t.num_bytes, " bytes but shape ",
             ShapeString(t.shape), " of ", DTypeName(t.dtype), " needs ",
             t.NumElements() * DTypeSize(t.dtype));
      if (offsets[1] > data_size)
        Fail(path, ": truncated file: tensor ", name, " ends at byte ", offsets[1],
             " of the data section but the file holds only ", data_size, " data bytes");
      t.data = data_start + offsets[0];
      ranges.emplace_back(offsets[0], offsets[1]);
    } catch (const nlohmann::json::exception& e) {
      Fail(path, ": corrupt header entry for tensor ", name, ": ", e.what());
    }
    tensors_.emplace(name, std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      Fail(path, ": corrupt header: tensor data ranges overlap");
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, map_size_);
}

}  // namespace moeserve::loader
