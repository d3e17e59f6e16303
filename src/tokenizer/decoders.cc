#include "tokenizer/decoders.h"

#include "core/check.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace moeserve::tokenizer {

std::string ByteLevelTokenBytes(const std::string& token) {
  const ByteLevelAlphabet& alphabet = GetByteLevelAlphabet();
  std::string bytes;
  bytes.reserve(token.size());
  for (size_t pos = 0; pos < token.size();) {
    char32_t cp = NextCodePoint(token, pos);
    if (cp >= 324 || alphabet.char_to_byte[cp] < 0) return token;
    bytes.push_back(char(alphabet.char_to_byte[cp]));
  }
  return bytes;
}

namespace {

const std::string kReplacementChar = "\xEF\xBF\xBD";

class ByteLevel : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const auto& t : tokens) bytes += ByteLevelTokenBytes(t);
    tokens.assign(1, Utf8Lossy(bytes));
  }
  bool IsByteLevel() const override { return true; }
};

class ByteFallback : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (IsValidUtf8(pending)) {
        out.push_back(pending);
      } else {
        for (size_t i = 0; i < pending.size(); ++i) out.push_back(kReplacementChar);
      }
      pending.clear();
    };
    for (auto& t : tokens) {
      int byte = ParseByteToken(t);
      if (byte >= 0) {
        pending.push_back(char(byte));
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens.swap(out);
  }

 private:
  static int HexDigit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int ParseByteToken(const std::string& t) {
    if (t.size() != 6 || !t.starts_with("<0x") || t[5] != '>') return -1;
    int hi = HexDigit(t[3]), lo = HexDigit(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
  }
};

class Fuse : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class Strip : public Decoder {
 public:
  explicit Strip(const nlohmann::json& spec)
      : start_(spec.value("start", size_t(0))), stop_(spec.value("stop", size_t(0))) {
    std::string c = spec.at("content").get<std::string>();
    size_t pos = 0;
    if (c.empty()) Fail("decoder Strip: empty content");
    content_ = NextCodePoint(c, pos);
  }
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      std::vector<char32_t> chars;
      for (size_t pos = 0; pos < t.size();) chars.push_back(NextCodePoint(t, pos));
      size_t start_cut = 0;
      for (size_t i = 0; i < chars.size() && i < start_; ++i) {
        if (chars[i] != content_) break;
        start_cut = i + 1;
      }
      size_t stop_cut = chars.size();
      for (size_t i = 0; i < chars.size() && i < stop_; ++i) {
        if (chars[chars.size() - 1 - i] != content_) break;
        stop_cut = chars.size() - 1 - i;
      }
      std::string out;
      for (size_t i = start_cut; i < stop_cut; ++i) AppendUtf8(chars[i], out);
      t = std::move(out);
    }
  }

 private:
  size_t start_, stop_;
  char32_t content_;
};

class Replace : public Decoder {
 public:
  explicit Replace(const nlohmann::json& spec)
      : pattern_(spec.at("pattern"), "decoder Replace"),
        content_(spec.at("content").get<std::string>()) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) t = pattern_.ReplaceAll(t, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class Metaspace : public Decoder {
 public:
  explicit Metaspace(const nlohmann::json& spec) {
    std::string rep = spec.value("replacement", std::string("\xE2\x96\x81"));
    size_t pos = 0;
    if (rep.empty()) Fail("decoder Metaspace: empty replacement");
    replacement_ = NextCodePoint(rep, pos);
    if (spec.contains("prepend_scheme")) {
      strip_first_ = spec["prepend_scheme"].get<std::string>() != "never";
    } else {
      strip_first_ = spec.value("add_prefix_space", true);
    }
  }
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      for (size_t pos = 0; pos < tokens[i].size();) {
        char32_t c = NextCodePoint(tokens[i], pos);
        if (c != replacement_) {
          AppendUtf8(c, out);
        } else if (!(i == 0 && strip_first_)) {
          out.push_back(' ');
        }
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  char32_t replacement_;
  bool strip_first_;
};

class Sequence : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->DecodeChain(tokens);
  }
  bool IsByteLevel() const override { return parts_.size() == 1 && parts_[0]->IsByteLevel(); }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::unique_ptr<Decoder> MakeDecoder(const nlohmann::json& spec) {
  if (spec.is_null()) return nullptr;
  if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string()) {
    Fail("tokenizer decoder: expected an object with a string 'type'");
  }
  const std::string type = spec["type"].get<std::string>();
  try {
    if (type == "ByteLevel") return std::make_unique<ByteLevel>();
    if (type == "ByteFallback") return std::make_unique<ByteFallback>();
    if (type == "Fuse") return std::make_unique<Fuse>();
    if (type == "Strip") return std::make_unique<Strip>(spec);
    if (type == "Replace") return std::make_unique<Replace>(spec);
    if (type == "Metaspace") return std::make_unique<Metaspace>(spec);
    if (type == "Sequence") {
      std::vector<std::unique_ptr<Decoder>> parts;
      for (const auto& child : spec.at("decoders")) {
        auto d = MakeDecoder(child);
        if (d) parts.push_back(std::move(d));
      }
      return std::make_unique<Sequence>(std::move(parts));
    }
  } catch (const nlohmann::json::exception& e) {
    Fail("tokenizer decoder ", type, ": malformed: ", e.what());
  }
  Fail("tokenizer: unsupported decoder type '", type, "'");
}

}  // namespace moeserve::tokenizer
