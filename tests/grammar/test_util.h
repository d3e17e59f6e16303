// Shared helpers for the grammar tests: a PCRE2 full-match reference and random strings.
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "grammar/ast.h"
#include "grammar/earley.h"
#include "grammar/gbnf_parser.h"

namespace moeserve::grammar::testing {

// A PCRE2 pattern compiled for full matches of UTF-8 text (the reference for regular grammars).
class Pcre {
 public:
  // PCRE2_DOTALL by default: GBNF's '.' matches a newline too. `full`: the whole subject must
  // match (else a match anywhere, JSON Schema's `pattern` semantics).
  explicit Pcre(const std::string& pattern, uint32_t flags = PCRE2_DOTALL, bool full = true) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    const std::string anchored = full ? "^(?:" + pattern + ")$" : pattern;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(anchored.data()), anchored.size(),
                          PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | flags, &err, &offset, nullptr);
    if (!code_) throw std::runtime_error("bad test pattern " + pattern);
    data_ = pcre2_match_data_create_from_pattern(code_, nullptr);
  }
  ~Pcre() {
    pcre2_match_data_free(data_);
    pcre2_code_free(code_);
  }
  Pcre(const Pcre&) = delete;
  bool FullMatch(const std::string& s) const { return Match(s); }
  bool Match(const std::string& s) const {
    return pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, data_,
                       nullptr) >= 0;
  }

 private:
  pcre2_code* code_ = nullptr;
  pcre2_match_data* data_ = nullptr;
};

// Whether the grammar matches all of `s`.
inline bool GrammarAccepts(const std::shared_ptr<const Grammar>& g, const std::string& s) {
  EarleyParser p(g);
  for (char c : s)
    if (!p.Advance(static_cast<uint8_t>(c))) return false;
  return p.CanFinish();
}

// Random strings made of `pieces` (whole UTF-8 characters or longer fragments).
inline std::string RandomString(std::mt19937& rng, const std::vector<std::string>& pieces,
                                int max_pieces) {
  std::string s;
  const int n = std::uniform_int_distribution<int>(0, max_pieces)(rng);
  for (int i = 0; i < n; ++i)
    s += pieces[std::uniform_int_distribution<size_t>(0, pieces.size() - 1)(rng)];
  return s;
}

}  // namespace moeserve::grammar::testing
