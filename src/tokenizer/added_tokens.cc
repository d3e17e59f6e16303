#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace moeserve::tokenizer {
namespace {

char32_t LastCodePoint(std::string_view s) {
  size_t start = s.size() - 1;
  while (start > 0 && (uint8_t(s[start]) & 0xC0) == 0x80) --start;
  return NextCodePoint(s, start);
}

// Start of the run of whitespace that ends `s` (the reference's `\s*$`).
size_t TrailingSpaceStart(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (uint8_t(s[start]) & 0xC0) == 0x80) --start;
    size_t probe = start;
    if (!IsWhitespace(NextCodePoint(s, probe))) break;
    end = start;
  }
  return end;
}

// Length of the run of whitespace that starts `s` (the reference's `^\s*`).
size_t LeadingSpaceLength(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t next = pos;
    if (!IsWhitespace(NextCodePoint(s, next))) break;
    pos = next;
  }
  return pos;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens,
                                     std::vector<std::string> patterns)
    : tokens_(std::move(tokens)) {
  nodes_.emplace_back();
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& p = patterns[t];
    if (p.empty()) continue;
    first_byte_[uint8_t(p[0])] = true;
    int32_t node = 0;
    for (char c : p) {
      int32_t child = -1;
      for (auto [b, n] : nodes_[size_t(node)].children) {
        if (b == uint8_t(c)) child = n;
      }
      if (child < 0) {
        child = int32_t(nodes_.size());
        nodes_[size_t(node)].children.emplace_back(uint8_t(c), child);
        nodes_.emplace_back();
      }
      node = child;
    }
    // With duplicate patterns the first one wins.
    if (nodes_[size_t(node)].token < 0) nodes_[size_t(node)].token = int32_t(t);
  }
}

int32_t AddedTokenMatcher::LongestAt(std::string_view text, size_t pos, size_t& len) const {
  int32_t node = 0, found = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    int32_t child = -1;
    for (auto [b, n] : nodes_[size_t(node)].children) {
      if (b == uint8_t(text[i])) {
        child = n;
        break;
      }
    }
    if (child < 0) break;
    node = child;
    if (nodes_[size_t(node)].token >= 0) {
      found = nodes_[size_t(node)].token;
      len = i + 1 - pos;
    }
  }
  return found;
}

void AddedTokenMatcher::Split(std::string_view text, std::vector<Piece>& out) const {
  size_t start_offset = 0;
  size_t search = 0;
  while (!tokens_.empty() && search < text.size()) {
    // Leftmost-longest: the first position where any pattern matches, its longest pattern.
    size_t pos = search, len = 0;
    int32_t t = -1;
    for (; pos < text.size(); ++pos) {
      if (!first_byte_[uint8_t(text[pos])]) continue;
      t = LongestAt(text, pos, len);
      if (t >= 0) break;
    }
    if (t < 0) break;
    size_t start = pos, stop = pos + len;
    search = stop;  // the automaton resumes after the raw match whatever the options do
    const AddedToken& tok = tokens_[size_t(t)];
    if (tok.single_word) {
      bool start_space = start == 0 || !IsWordChar(LastCodePoint(text.substr(0, start)));
      size_t probe = stop;
      bool stop_space = stop == text.size() || !IsWordChar(NextCodePoint(text, probe));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) start = std::max(TrailingSpaceStart(text.substr(0, start)), start_offset);
    if (tok.rstrip) stop += LeadingSpaceLength(text.substr(stop));
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, tok.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) out.push_back({start_offset, text.size(), -1});
}

}  // namespace moeserve::tokenizer
