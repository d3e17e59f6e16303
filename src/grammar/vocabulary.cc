#include "grammar/vocabulary.h"

#include <algorithm>

#include "core/check.h"

namespace moeserve::grammar {

Vocabulary::Vocabulary(std::vector<std::string> token_bytes, std::vector<bool> special,
                       std::vector<int32_t> stop_ids)
    : bytes_(std::move(token_bytes)), stop_ids_(std::move(stop_ids)) {
  const size_t n = bytes_.size();
  rank_.assign(n, -1);
  std::vector<bool> excluded(n, false);
  for (size_t id = 0; id < n; ++id)
    excluded[id] = bytes_[id].empty() || (id < special.size() && special[id]);
  for (int32_t id : stop_ids_) {
    MOESERVE_CHECK(id >= 0 && static_cast<size_t>(id) < n, "stop id ", id, " vocab ", n);
    excluded[id] = true;
  }
  for (size_t id = 0; id < n; ++id)
    if (!excluded[id]) sorted_.push_back(static_cast<int32_t>(id));
  std::sort(sorted_.begin(), sorted_.end(), [this](int32_t a, int32_t b) {
    return bytes_[a] < bytes_[b] || (bytes_[a] == bytes_[b] && a < b);
  });
  lcp_.assign(sorted_.size(), 0);
  first_byte_end_.assign(256, 0);
  for (size_t r = 0; r < sorted_.size(); ++r)
    first_byte_end_[static_cast<uint8_t>(bytes_[sorted_[r]][0])] = r + 1;
  for (int b = 1; b < 256; ++b)  // bytes no token starts with: their (empty) run ends where
    first_byte_end_[b] = std::max(first_byte_end_[b], first_byte_end_[b - 1]);  // b-1's did
  sorted_offset_.push_back(0);
  for (int32_t id : sorted_) {
    sorted_data_ += bytes_[id];
    sorted_offset_.push_back(static_cast<uint32_t>(sorted_data_.size()));
  }
  for (size_t r = 0; r < sorted_.size(); ++r) {
    rank_[sorted_[r]] = static_cast<int32_t>(r);
    if (r == 0) continue;
    const std::string& a = bytes_[sorted_[r - 1]];
    const std::string& b = bytes_[sorted_[r]];
    uint32_t k = 0;
    while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
    lcp_[r] = k;
  }
}

std::string ByteLevelTokenBytes(std::string_view token) {
  // GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes
  // for U+0100.. in byte order.
  static const std::vector<int> byte_of = [] {
    std::vector<int> table(0x144, -1);
    int next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      table[printable ? b : next++] = b;
    }
    return table;
  }();
  std::string out;
  for (size_t i = 0; i < token.size();) {
    const auto c = static_cast<unsigned char>(token[i]);
    const size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (size_t k = 1; k < len && i + k < token.size(); ++k) cp = (cp << 6) | (token[i + k] & 0x3F);
    i += len;
    if (cp < byte_of.size() && byte_of[cp] >= 0) out += static_cast<char>(byte_of[cp]);
  }
  return out;
}

bool Vocabulary::is_stop(int32_t id) const {
  return std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end();
}

}  // namespace moeserve::grammar
