#include "tokenizer/normalizers.h"

#include <unicode/uchar.h>

#include <vector>

#include "core/check.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace moeserve::tokenizer {
namespace {

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  void Normalize(std::string& text) const override { text = tokenizer::Normalize(text, form_); }

 private:
  NormalForm form_;
};

class Lowercase : public Normalizer {
 public:
  void Normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) AppendLowercase(NextCodePoint(text, pos), out);
    text = std::move(out);
  }
};

class Replace : public Normalizer {
 public:
  explicit Replace(const nlohmann::json& spec)
      : pattern_(spec.at("pattern"), "normalizer Replace"),
        content_(spec.at("content").get<std::string>()) {}
  void Normalize(std::string& text) const override { text = pattern_.ReplaceAll(text, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void Normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void Normalize(std::string& text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        size_t next = begin;
        if (!IsWhitespace(NextCodePoint(text, next))) break;
        begin = next;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (uint8_t(text[start]) & 0xC0) == 0x80) --start;
        size_t probe = start;
        if (!IsWhitespace(NextCodePoint(text, probe))) break;
        end = start;
      }
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

// Removes non-spacing marks (general category Mn), as the reference's StripAccents does.
class StripAccents : public Normalizer {
 public:
  void Normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
      char32_t cp = NextCodePoint(text, pos);
      if (u_charType(UChar32(cp)) != U_NON_SPACING_MARK) AppendUtf8(cp, out);
    }
    text = std::move(out);
  }
};

class Sequence : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void Normalize(std::string& text) const override {
    for (const auto& p : parts_) p->Normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> MakeNormalizer(const nlohmann::json& spec) {
  if (spec.is_null()) return nullptr;
  if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string()) {
    Fail("tokenizer normalizer: expected an object with a string 'type'");
  }
  const std::string type = spec["type"].get<std::string>();
  try {
    if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfc);
    if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfkc);
    if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfd);
    if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfkd);
    if (type == "Lowercase") return std::make_unique<Lowercase>();
    if (type == "Replace") return std::make_unique<Replace>(spec);
    if (type == "Prepend") return std::make_unique<Prepend>(spec.at("prepend").get<std::string>());
    if (type == "Strip") {
      return std::make_unique<Strip>(spec.value("strip_left", true),
                                     spec.value("strip_right", true));
    }
    if (type == "StripAccents") return std::make_unique<StripAccents>();
    if (type == "Sequence") {
      std::vector<std::unique_ptr<Normalizer>> parts;
      for (const auto& child : spec.at("normalizers")) {
        auto n = MakeNormalizer(child);
        if (n) parts.push_back(std::move(n));
      }
      return std::make_unique<Sequence>(std::move(parts));
    }
  } catch (const nlohmann::json::exception& e) {
    Fail("tokenizer normalizer ", type, ": malformed: ", e.what());
  }
  Fail("tokenizer: unsupported normalizer type '", type, "'");
}

}  // namespace moeserve::tokenizer
