#include "tokenizer/pattern.h"

#include "core/check.h"

namespace moeserve::tokenizer {

Pattern::Pattern(const nlohmann::json& spec, const std::string& what) {
  if (spec.is_object() && spec.contains("Regex") && spec["Regex"].is_string()) {
    regex_ = std::make_unique<Regex>(spec["Regex"].get<std::string>(), what);
  } else if (spec.is_object() && spec.contains("String") && spec["String"].is_string()) {
    literal_ = spec["String"].get<std::string>();
  } else if (spec.is_string()) {
    literal_ = spec.get<std::string>();
  } else {
    Fail(what, ": 'pattern' must be {\"String\": ...} or {\"Regex\": ...}");
  }
}

void Pattern::FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  if (regex_) {
    regex_->FindAll(text, out);
    return;
  }
  if (literal_.empty()) return;  // an empty literal never matches (reference behaviour)
  for (size_t pos = text.find(literal_); pos != std::string_view::npos;
       pos = text.find(literal_, pos + literal_.size())) {
    out.emplace_back(pos, pos + literal_.size());
  }
}

std::string Pattern::ReplaceAll(std::string_view text, std::string_view content) const {
  std::vector<std::pair<size_t, size_t>> matches;
  FindAll(text, matches);
  if (matches.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t last = 0;
  for (auto [b, e] : matches) {
    out.append(text.substr(last, b - last));
    out.append(content);
    last = e;
  }
  out.append(text.substr(last));
  return out;
}

}  // namespace moeserve::tokenizer
