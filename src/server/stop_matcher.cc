#include "server/stop_matcher.h"

#include <algorithm>

namespace moeserve::server {

StopPatterns::StopPatterns(std::vector<std::string> stops) : stops_(std::move(stops)) {
  failure_.reserve(stops_.size());
  for (const std::string& s : stops_) {
    std::vector<uint32_t> f(s.size(), 0);
    uint32_t k = 0;
    for (size_t i = 1; i < s.size(); ++i) {
      while (k > 0 && s[i] != s[k]) k = f[k - 1];
      if (s[i] == s[k]) ++k;
      f[i] = k;
    }
    failure_.push_back(std::move(f));
  }
}

StopMatcher::StopMatcher(std::shared_ptr<const StopPatterns> patterns)
    : patterns_(std::move(patterns)), state_(patterns_->size(), 0) {}

std::optional<StopMatcher::Hit> StopMatcher::Feed(std::string_view text) {
  const StopPatterns& p = *patterns_;
  for (size_t pos = 0; pos < text.size(); ++pos) {
    const char c = text[pos];
    std::optional<Hit> hit;
    for (size_t i = 0; i < p.size(); ++i) {
      const std::string& s = p.stop(i);
      const std::vector<uint32_t>& f = p.failure(i);
      uint32_t k = state_[i];
      while (k > 0 && s[k] != c) k = f[k - 1];
      if (s[k] == c) ++k;
      if (k == s.size()) {
        if (!hit || s.size() > p.stop(hit->stop_index).size()) hit = Hit{i, pos + 1};
        k = f[k - 1];  // keeps the state a proper prefix when feeding goes on
      }
      state_[i] = k;
    }
    if (hit) return hit;
  }
  return std::nullopt;
}

size_t StopMatcher::HeldBack() const {
  size_t keep = 0;
  for (uint32_t k : state_) keep = std::max<size_t>(keep, k);
  return keep;
}

}  // namespace moeserve::server
