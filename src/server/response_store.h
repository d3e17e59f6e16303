// The OpenAI Responses API's stored responses (`store`, `previous_response_id`,
// GET /v1/responses/{id}): the most recent ones in memory, least recently used evicted first,
// bounded by count and by bytes so a flood of large conversations cannot grow the server. Lost on
// restart, as the API allows (a missing id is a clear 400/404).
//
// Thread-safe.
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>

namespace moeserve::server {

class ResponseStore {
 public:
  struct Entry {
    nlohmann::ordered_json response;  // the response object, as GET /v1/responses/{id} returns
    // The conversation in chat form up to and including this response's output (without the
    // request's instructions, which a follow-up does not inherit).
    nlohmann::ordered_json messages;
  };

  explicit ResponseStore(size_t max_entries = 1000, size_t max_bytes = 64u << 20)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}

  // Stores (or replaces) `id`, then evicts the least recently used entries over the bounds. An
  // entry larger than max_bytes on its own is not stored.
  void Put(const std::string& id, Entry entry);
  // The entry, marked most recently used; nullopt when unknown or evicted.
  std::optional<Entry> Get(const std::string& id);
  size_t size() const;

 private:
  struct Slot {
    std::string id;
    Entry entry;
    size_t bytes;
  };
  const size_t max_entries_, max_bytes_;
  mutable std::mutex mu_;
  std::list<Slot> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Slot>::iterator> index_;
  size_t bytes_ = 0;
};

}  // namespace moeserve::server
