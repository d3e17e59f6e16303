// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): Split (String or Regex pattern, the five
// delimiter behaviours, invert), ByteLevel (add_prefix_space, use_regex with the GPT-2 pattern),
// Digits, Metaspace, Whitespace, WhitespaceSplit and Sequence. They cut a segment into words.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace moeserve::tokenizer {

// Words being cut: spans into an arena, so splitting never copies text. Rewrites (a prefix
// space, Metaspace's replacement) append the new text to the arena.
struct Pieces {
  struct Span {
    size_t begin, end;
  };
  std::string arena;
  std::vector<Span> spans;
  // Span begin that corresponds to offset 0 of the original input (Metaspace "first" scheme);
  // npos when this segment does not start the input.
  size_t origin = std::string::npos;
  // Set by a ByteLevel pre-tokenizer that runs last: the words still hold raw bytes and the
  // model applies the byte-to-char mapping itself (only on a cache miss).
  bool byte_level_pending = false;

  std::string_view View(const Span& s) const {
    return std::string_view(arena).substr(s.begin, s.end - s.begin);
  }
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // `is_last`: no pre-tokenizer runs after this one.
  virtual void PreTokenize(Pieces& pieces, bool is_last) const = 0;
};

// Null JSON gives nullptr. Throws moeserve::Error ("unsupported pre_tokenizer type 'X'").
std::unique_ptr<PreTokenizer> MakePreTokenizer(const nlohmann::json& spec);

}  // namespace moeserve::tokenizer
