#include "loader/safetensors_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/check.h"

namespace moeserve::loader {

size_t TensorSpec::NumBytes() const {
  size_t n = DTypeSize(dtype);
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

SafetensorsWriter::SafetensorsWriter(std::string path, std::vector<TensorSpec> specs,
                                     const std::map<std::string, std::string>& metadata)
    : path_(std::move(path)) {
  for (const TensorSpec& s : specs)
    for (int64_t d : s.shape)
      if (d < 0) Fail(path_, ": tensor ", s.name, " has a negative dimension");
  std::stable_sort(specs.begin(), specs.end(), [](const TensorSpec& a, const TensorSpec& b) {
    const size_t wa = DTypeSize(a.dtype), wb = DTypeSize(b.dtype);
    return wa != wb ? wa > wb : a.name < b.name;
  });

  // ordered_json keeps insertion order, so the header lists tensors in data order.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  size_t data_bytes = 0;
  for (const TensorSpec& s : specs) {
    if (slots_.count(s.name) || s.name == "__metadata__")
      Fail(path_, ": tensor name ", s.name, " is declared twice or reserved");
    const size_t n = s.NumBytes();
    header[s.name] = {{"dtype", std::string(DTypeName(s.dtype))},
                      {"shape", s.shape},
                      {"data_offsets", {data_bytes, data_bytes + n}}};
    slots_[s.name] = Slot{data_bytes, n, false};
    order_.push_back(s.name);
    data_bytes += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const size_t data_start = 8 + text.size();
  for (auto& [name, slot] : slots_) slot.offset += data_start;
  file_bytes_ = data_start + data_bytes;

  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_) Fail(path_, ": cannot create: ", std::strerror(errno));
  uint8_t len_le[8];
  for (int i = 0; i < 8; ++i) len_le[i] = static_cast<uint8_t>(uint64_t{text.size()} >> (8 * i));
  if (std::fwrite(len_le, 1, 8, file_) != 8 ||
      std::fwrite(text.data(), 1, text.size(), file_) != text.size())
    Fail(path_, ": write failed: ", std::strerror(errno));
  position_ = data_start;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (file_) std::fclose(file_);
}

void SafetensorsWriter::Write(const std::string& name, const void* data, size_t num_bytes) {
  MOESERVE_CHECK(file_ != nullptr, path_, ": Write after Finish");
  auto it = slots_.find(name);
  MOESERVE_CHECK(it != slots_.end(), path_, ": tensor ", name, " was not declared");
  Slot& slot = it->second;
  MOESERVE_CHECK(!slot.written, path_, ": tensor ", name, " written twice");
  MOESERVE_CHECK(num_bytes == slot.num_bytes, path_, ": tensor ", name, " has ", num_bytes,
                 " bytes, declared ", slot.num_bytes);
  if (position_ != slot.offset && ::fseeko(file_, static_cast<off_t>(slot.offset), SEEK_SET) != 0)
    Fail(path_, ": seek failed: ", std::strerror(errno));
  if (num_bytes && std::fwrite(data, 1, num_bytes, file_) != num_bytes)
    Fail(path_, ": write of ", name, " failed: ", std::strerror(errno));
  position_ = slot.offset + num_bytes;
  slot.written = true;
}

size_t SafetensorsWriter::Finish() {
  MOESERVE_CHECK(file_ != nullptr, path_, ": Finish called twice");
  for (const auto& [name, slot] : slots_)
    MOESERVE_CHECK(slot.written, path_, ": tensor ", name, " was declared but never written");
  const bool ok = std::fflush(file_) == 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!ok || !closed) Fail(path_, ": write failed: ", std::strerror(errno));
  return file_bytes_;
}

}  // namespace moeserve::loader
