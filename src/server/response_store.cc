#include "server/response_store.h"

namespace moeserve::server {

void ResponseStore::Put(const std::string& id, Entry entry) {
  const size_t bytes = id.size() + entry.response.dump().size() + entry.messages.dump().size();
  std::lock_guard lock(mu_);
  if (auto it = index_.find(id); it != index_.end()) {
    bytes_ -= it->second->bytes;
    lru_.erase(it->second);
    index_.erase(it);
  }
  if (bytes > max_bytes_) return;
  lru_.push_front({id, std::move(entry), bytes});
  index_[id] = lru_.begin();
  bytes_ += bytes;
  while (lru_.size() > max_entries_ || bytes_ > max_bytes_) {
    bytes_ -= lru_.back().bytes;
    index_.erase(lru_.back().id);
    lru_.pop_back();
  }
}

std::optional<ResponseStore::Entry> ResponseStore::Get(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->entry;
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

}  // namespace moeserve::server
