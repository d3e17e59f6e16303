// Stop-string search over streamed text, for the engine thread: each stop string is a
// Knuth-Morris-Pratt automaton whose state is the longest suffix of the text so far that is a
// prefix of that stop string. Feeding text costs O(bytes x stop strings) amortized, however long
// the stop strings are (a naive rescan of held-back text is quadratic in their length), and the
// held-back length (text that may still become a stop string) is the largest state.
//
// StopPatterns (the failure tables) is built once per request and shared by its choices;
// StopMatcher holds one choice's states. Not thread-safe; one matcher per choice.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moeserve::server {

class StopPatterns {
 public:
  explicit StopPatterns(std::vector<std::string> stops);
  size_t size() const { return stops_.size(); }
  const std::string& stop(size_t i) const { return stops_[i]; }
  // failure(i)[k]: the longest proper prefix of stop(i)[0, k] that is also its suffix.
  const std::vector<uint32_t>& failure(size_t i) const { return failure_[i]; }

 private:
  std::vector<std::string> stops_;  // non-empty strings
  std::vector<std::vector<uint32_t>> failure_;
};

class StopMatcher {
 public:
  explicit StopMatcher(std::shared_ptr<const StopPatterns> patterns);

  struct Hit {
    size_t stop_index;  // which stop string
    size_t end;         // offset in the fed text just past the stop string's last byte
  };
  // Feeds `text` byte by byte and stops at the first byte that completes a stop string (the
  // longest one when several end there). The rest of `text` is not fed.
  std::optional<Hit> Feed(std::string_view text);
  // Bytes at the end of the text fed so far that are a proper prefix of some stop string.
  size_t HeldBack() const;

 private:
  std::shared_ptr<const StopPatterns> patterns_;
  std::vector<uint32_t> state_;  // per stop string: bytes of it matched at the end of the text
};

}  // namespace moeserve::server
