// Memory that is resident from the moment it exists: an anonymous mapping whose pages are all
// faulted in (and zeroed) at construction, backed by transparent huge pages where the kernel
// allows. The KV pool uses it, as vLLM reserves its KV cache up front: the server's RSS after
// start-up already holds the whole cache, so a burst that reaches blocks never used before does
// not raise the RSS (the soak benchmark measured +30 MB steps of first-touched KV pages, issue
// 14), a machine too small for the cache fails at start-up instead of under load, and no request
// pays page faults on its first blocks.
#pragma once

#include <cstddef>
#include <cstdint>

namespace moeserve::cache {

class ResidentMemory {
 public:
  ResidentMemory() = default;
  explicit ResidentMemory(size_t bytes);  // throws moeserve::Error when the memory is not there
  ~ResidentMemory();
  ResidentMemory(ResidentMemory&& other) noexcept;
  ResidentMemory& operator=(ResidentMemory&& other) noexcept;
  ResidentMemory(const ResidentMemory&) = delete;
  ResidentMemory& operator=(const ResidentMemory&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace moeserve::cache
