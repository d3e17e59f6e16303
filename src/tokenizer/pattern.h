// The "pattern" field shared by Split, Replace normalizer and Replace decoder: {"String": s} or
// {"Regex": r}. Both forms find non-overlapping matches left to right.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/regex.h"

namespace moeserve::tokenizer {

class Pattern {
 public:
  Pattern(const nlohmann::json& spec, const std::string& what);
  // Appends (begin, end) of every match in `text`.
  void FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;
  // Replaces every match with `content`.
  std::string ReplaceAll(std::string_view text, std::string_view content) const;

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
};

}  // namespace moeserve::tokenizer
