// Added tokens (tokenizer.json "added_tokens"): strings matched in the input before the
// normalizer and pre-tokenizer run, leftmost-longest like the reference's Aho-Corasick
// automaton, with the single_word / lstrip / rstrip options.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moeserve::tokenizer {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

// A set of added tokens matched together (the reference keeps one for tokens matched on the raw
// text and one for tokens matched on normalized text).
class AddedTokenMatcher {
 public:
  // `patterns[i]` is what to look for (the content, or its normalized form) for `tokens[i]`.
  AddedTokenMatcher(std::vector<AddedToken> tokens, std::vector<std::string> patterns);
  AddedTokenMatcher() = default;

  struct Piece {
    size_t begin, end;
    int32_t id;  // -1: plain text
  };
  // Cuts `text` into plain-text and token splits covering it (empty text gives no splits).
  void Split(std::string_view text, std::vector<Piece>& out) const;
  bool Empty() const { return tokens_.empty(); }

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;
    int32_t token = -1;  // index into tokens_ when a pattern ends here
  };
  // Longest pattern starting at `pos`; returns the token index or -1 and sets `len`.
  int32_t LongestAt(std::string_view text, size_t pos, size_t& len) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> nodes_;
  bool first_byte_[256] = {};
};

}  // namespace moeserve::tokenizer
