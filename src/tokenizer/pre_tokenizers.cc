#include "tokenizer/pre_tokenizers.h"

#include <algorithm>
#include <functional>

#include "core/check.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace moeserve::tokenizer {
namespace {

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior ParseBehavior(const nlohmann::json& v, const std::string& what) {
  const std::string s = v.get<std::string>();
  if (s == "Removed") return Behavior::kRemoved;
  if (s == "Isolated") return Behavior::kIsolated;
  if (s == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return Behavior::kMergedWithNext;
  if (s == "Contiguous") return Behavior::kContiguous;
  Fail(what, ": unknown split behavior '", s, "'");
}

struct Segment {
  size_t begin, end;
  bool flag;  // before the behaviour: "is a match"; after: "remove"
};

// Turns the matches inside [0, len) into alternating gap / match segments covering it all.
void Segments(size_t len, const std::vector<std::pair<size_t, size_t>>& matches, bool invert,
              std::vector<Segment>& out) {
  out.clear();
  if (len == 0) {
    out.push_back({0, 0, invert});
    return;
  }
  size_t prev = 0;
  for (auto [b, e] : matches) {
    if (prev != b) out.push_back({prev, b, invert});
    out.push_back({b, e, !invert});
    prev = e;
  }
  if (prev != len) out.push_back({prev, len, invert});
}

// The delimiter behaviours, as NormalizedString::split defines them.
void ApplyBehavior(Behavior behavior, std::vector<Segment>& segs) {
  std::vector<Segment> acc;
  acc.reserve(segs.size());
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kRemoved:
      return;
    case Behavior::kIsolated:
      for (auto& s : segs) s.flag = false;
      return;
    case Behavior::kContiguous:
      for (const auto& s : segs) {
        if (s.flag == previous_match && !acc.empty()) {
          acc.back().end = s.end;
        } else {
          acc.push_back({s.begin, s.end, false});
        }
        previous_match = s.flag;
      }
      break;
    case Behavior::kMergedWithPrevious:
      for (const auto& s : segs) {
        if (s.flag && !previous_match && !acc.empty()) {
          acc.back().end = s.end;
        } else {
          acc.push_back({s.begin, s.end, false});
        }
        previous_match = s.flag;
      }
      break;
    case Behavior::kMergedWithNext:
      for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
        if (it->flag && !previous_match && !acc.empty()) {
          acc.back().begin = it->begin;
        } else {
          acc.push_back({it->begin, it->end, false});
        }
        previous_match = it->flag;
      }
      std::reverse(acc.begin(), acc.end());
      break;
  }
  segs.swap(acc);
}

// Runs `find` on every span and replaces it with the kept, non-empty parts.
void SplitSpans(
    Pieces& pieces, Behavior behavior, bool invert,
    const std::function<void(std::string_view, std::vector<std::pair<size_t, size_t>>&)>& find) {
  std::vector<Pieces::Span> out;
  out.reserve(pieces.spans.size() * 2);
  std::vector<std::pair<size_t, size_t>> matches;
  std::vector<Segment> segs;
  for (const auto& span : pieces.spans) {
    matches.clear();
    find(pieces.View(span), matches);
    Segments(span.end - span.begin, matches, invert, segs);
    ApplyBehavior(behavior, segs);
    for (const auto& s : segs) {
      if (!s.flag && s.end > s.begin) out.push_back({span.begin + s.begin, span.begin + s.end});
    }
  }
  pieces.spans.swap(out);
}

// Matches each character satisfying `pred` on its own (the reference's char-predicate pattern).
void FindChars(std::string_view text, bool (*pred)(char32_t),
               std::vector<std::pair<size_t, size_t>>& out) {
  for (size_t pos = 0; pos < text.size();) {
    size_t start = pos;
    if (pred(NextCodePoint(text, pos))) out.emplace_back(start, pos);
  }
}

class Split : public PreTokenizer {
 public:
  explicit Split(const nlohmann::json& spec)
      : pattern_(spec.at("pattern"), "pre_tokenizer Split"),
        behavior_(ParseBehavior(spec.at("behavior"), "pre_tokenizer Split")),
        invert_(spec.value("invert", false)) {}
  void PreTokenize(Pieces& pieces, bool) const override {
    SplitSpans(pieces, behavior_, invert_,
               [this](std::string_view t, auto& m) { pattern_.FindAll(t, m); });
  }

 private:
  Pattern pattern_;
  Behavior behavior_;
  bool invert_;
};

constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevel : public PreTokenizer {
 public:
  explicit ByteLevel(const nlohmann::json& spec)
      : add_prefix_space_(spec.value("add_prefix_space", true)),
        use_regex_(spec.value("use_regex", true)) {
    if (use_regex_) regex_ = std::make_unique<Regex>(kGpt2Pattern, "pre_tokenizer ByteLevel");
  }
  void PreTokenize(Pieces& pieces, bool is_last) const override {
    if (add_prefix_space_) {
      for (auto& span : pieces.spans) {
        if (pieces.View(span).starts_with(' ')) continue;
        // Each word (not only the first) gets the space, as in the reference.
        size_t begin = pieces.arena.size();
        std::string text = " " + std::string(pieces.View(span));
        if (span.begin == pieces.origin) pieces.origin = begin;
        pieces.arena += text;
        span = {begin, pieces.arena.size()};
      }
    }
    if (use_regex_) {
      SplitSpans(pieces, Behavior::kIsolated, false,
                 [this](std::string_view t, auto& m) { regex_->FindAll(t, m); });
    }
    if (is_last) {
      pieces.byte_level_pending = true;
      return;
    }
    const ByteLevelAlphabet& alphabet = GetByteLevelAlphabet();
    for (auto& span : pieces.spans) {
      size_t begin = pieces.arena.size();
      std::string mapped;
      for (char c : pieces.View(span)) mapped += alphabet.byte_to_utf8[uint8_t(c)];
      if (span.begin == pieces.origin) pieces.origin = begin;
      pieces.arena += mapped;
      span = {begin, pieces.arena.size()};
    }
  }

 private:
  bool add_prefix_space_;
  bool use_regex_;
  std::unique_ptr<Regex> regex_;
};

class Digits : public PreTokenizer {
 public:
  explicit Digits(const nlohmann::json& spec)
      : individual_(spec.value("individual_digits", false)) {}
  void PreTokenize(Pieces& pieces, bool) const override {
    SplitSpans(pieces, individual_ ? Behavior::kIsolated : Behavior::kContiguous, false,
               [](std::string_view t, auto& m) { FindChars(t, IsNumeric, m); });
  }

 private:
  bool individual_;
};

bool IsWhitespaceChar(char32_t c) {
  return IsWhitespace(c);
}

class WhitespaceSplit : public PreTokenizer {
 public:
  void PreTokenize(Pieces& pieces, bool) const override {
    SplitSpans(pieces, Behavior::kRemoved, false,
               [](std::string_view t, auto& m) { FindChars(t, IsWhitespaceChar, m); });
  }
};

class Whitespace : public PreTokenizer {
 public:
  Whitespace() : regex_(R"(\w+|[^\w\s]+)", "pre_tokenizer Whitespace") {}
  void PreTokenize(Pieces& pieces, bool) const override {
    SplitSpans(pieces, Behavior::kRemoved, true,
               [this](std::string_view t, auto& m) { regex_.FindAll(t, m); });
  }

 private:
  Regex regex_;
};

class Metaspace : public PreTokenizer {
 public:
  explicit Metaspace(const nlohmann::json& spec) {
    std::string rep = spec.value("replacement", std::string("\xE2\x96\x81"));
    size_t pos = 0;
    if (rep.empty()) Fail("pre_tokenizer Metaspace: empty replacement");
    NextCodePoint(rep, pos);  // the replacement is one character
    replacement_ = rep.substr(0, pos);
    if (spec.contains("prepend_scheme")) {
      scheme_ = spec["prepend_scheme"].get<std::string>();
    } else {
      scheme_ = spec.value("add_prefix_space", true) ? "always" : "never";
    }
    if (scheme_ != "always" && scheme_ != "never" && scheme_ != "first") {
      Fail("pre_tokenizer Metaspace: unknown prepend_scheme '", scheme_, "'");
    }
    split_ = spec.value("split", true);
  }
  void PreTokenize(Pieces& pieces, bool) const override {
    for (auto& span : pieces.spans) {
      std::string text;
      for (char c : pieces.View(span)) {
        if (c == ' ') {
          text += replacement_;
        } else {
          text += c;
        }
      }
      bool prepend = !std::string_view(text).starts_with(replacement_) &&
                     (scheme_ == "always" || (scheme_ == "first" && span.begin == pieces.origin));
      if (prepend) text.insert(0, replacement_);
      size_t begin = pieces.arena.size();
      if (span.begin == pieces.origin) pieces.origin = begin;
      pieces.arena += text;
      span = {begin, pieces.arena.size()};
    }
    if (split_) {
      SplitSpans(pieces, Behavior::kMergedWithNext, false, [this](std::string_view t, auto& m) {
        for (size_t p = t.find(replacement_); p != std::string_view::npos;
             p = t.find(replacement_, p + replacement_.size())) {
          m.emplace_back(p, p + replacement_.size());
        }
      });
    }
  }

 private:
  std::string replacement_;
  std::string scheme_;
  bool split_;
};

class Sequence : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void PreTokenize(Pieces& pieces, bool is_last) const override {
    for (size_t i = 0; i < parts_.size(); ++i) {
      parts_[i]->PreTokenize(pieces, is_last && i + 1 == parts_.size());
    }
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

}  // namespace

std::unique_ptr<PreTokenizer> MakePreTokenizer(const nlohmann::json& spec) {
  if (spec.is_null()) return nullptr;
  if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string()) {
    Fail("tokenizer pre_tokenizer: expected an object with a string 'type'");
  }
  const std::string type = spec["type"].get<std::string>();
  try {
    if (type == "Split") return std::make_unique<Split>(spec);
    if (type == "ByteLevel") return std::make_unique<ByteLevel>(spec);
    if (type == "Digits") return std::make_unique<Digits>(spec);
    if (type == "Metaspace") return std::make_unique<Metaspace>(spec);
    if (type == "Whitespace") return std::make_unique<Whitespace>();
    if (type == "WhitespaceSplit") return std::make_unique<WhitespaceSplit>();
    if (type == "Sequence") {
      std::vector<std::unique_ptr<PreTokenizer>> parts;
      for (const auto& child : spec.at("pretokenizers")) {
        auto p = MakePreTokenizer(child);
        if (p) parts.push_back(std::move(p));
      }
      return std::make_unique<Sequence>(std::move(parts));
    }
  } catch (const nlohmann::json::exception& e) {
    Fail("tokenizer pre_tokenizer ", type, ": malformed: ", e.what());
  }
  Fail("tokenizer: unsupported pre_tokenizer type '", type, "'");
}

}  // namespace moeserve::tokenizer
