// PCRE2 (UTF + UCP, JIT) wrapper with the Oniguruma semantics Hugging Face `tokenizers` uses for
// its Split and Replace patterns. Compiled once, then shared read-only by all threads: per-call
// state (match data, JIT stack) is thread-local.
//
// Pattern translation (Oniguruma -> PCRE2): PCRE2 takes the GPT-2, Llama 3, Qwen and o200k
// patterns as they are, including \p{..} classes, (?i:..), look-ahead and possessive quantifiers.
// The only rewrites are escapes whose meaning differs: Oniguruma's \h / \H mean a hex digit (PCRE2:
// horizontal space), so they become [0-9a-fA-F] / [^0-9a-fA-F]. Everything else passes through.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moeserve::tokenizer {

class Regex {
 public:
  // Throws moeserve::Error naming `what` (the component) when the pattern does not compile.
  Regex(const std::string& pattern, const std::string& what);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Finds the next match at or after byte `start` of valid UTF-8 `text`; false when none.
  bool Find(std::string_view text, size_t start, size_t& match_begin, size_t& match_end) const;

  // All non-overlapping matches as (begin, end) byte offsets, in order. An empty match advances
  // the search by one character, as Oniguruma's iterator does.
  void FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

  // Exposed for tests: the pattern after the Oniguruma -> PCRE2 rewrite.
  static std::string Translate(const std::string& onig_pattern);

 private:
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

// Escapes `literal` so that it matches itself.
std::string RegexEscape(std::string_view literal);

}  // namespace moeserve::tokenizer
