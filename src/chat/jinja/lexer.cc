#include "chat/jinja/lexer.h"

#include <cstdint>

#include "chat/jinja/error.h"
#include "chat/jinja/value.h"

namespace moeserve::chat::jinja {
namespace {

// Source text after HF's preprocessing, with the original line of every byte kept so errors can
// name lines of the file the user wrote.
struct Source {
  std::string text;
  std::vector<int32_t> line;
  void Push(char c, int32_t l) {
    text += c;
    line.push_back(l);
  }
};

bool StartsWith(std::string_view s, size_t pos, std::string_view p) {
  return s.size() >= pos + p.size() && s.compare(pos, p.size(), p) == 0;
}

// Length in bytes of the JS line terminator / whitespace starting at s[i], 0 if none.
size_t WhitespaceAt(std::string_view s, size_t i) {
  unsigned char c = s[i];
  if (c < 0x80) return IsJsWhitespace(c) ? 1 : 0;
  size_t len = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  if (i + len > s.size()) return 0;
  std::vector<char32_t> cp = DecodeUtf8(s.substr(i, len));
  return cp.size() == 1 && IsJsWhitespace(cp[0]) ? len : 0;
}

// JS `^` in multiline mode matches after \n, \r, U+2028 and U+2029.
bool IsLineStart(const std::string& s, size_t i) {
  if (i == 0) return true;
  char p = s[i - 1];
  if (p == '\n' || p == '\r') return true;
  return i >= 3 && (StartsWith(s, i - 3, "\xe2\x80\xa8") || StartsWith(s, i - 3, "\xe2\x80\xa9"));
}

Source Preprocess(std::string_view raw) {
  Source a;
  int32_t l = 1;
  for (char c : raw) {
    a.Push(c, l);
    if (c == '\n') ++l;
  }
  if (!a.text.empty() && a.text.back() == '\n') {
    a.text.pop_back();
    a.line.pop_back();
  }
  // lstrip_blocks: /^[ \t]*({[#%-])/gm -> "$1"
  Source b;
  for (size_t i = 0; i < a.text.size();) {
    if (IsLineStart(a.text, i)) {
      size_t j = i;
      while (j < a.text.size() && (a.text[j] == ' ' || a.text[j] == '\t')) ++j;
      if (j > i && j + 1 < a.text.size() && a.text[j] == '{' &&
          (a.text[j + 1] == '#' || a.text[j + 1] == '%' || a.text[j + 1] == '-')) {
        i = j;
      }
    }
    b.Push(a.text[i], a.line[i]);
    ++i;
  }
  // trim_blocks: /([#%-]})\n/g -> "$1"
  Source c;
  for (size_t i = 0; i < b.text.size(); ++i) {
    c.Push(b.text[i], b.line[i]);
    if (i + 2 < b.text.size() + 0 && b.text[i + 1] == '}' && b.text[i + 2] == '\n' &&
        (b.text[i] == '#' || b.text[i] == '%' || b.text[i] == '-')) {
      c.Push('}', b.line[i + 1]);
      i += 2;  // skip '}' (pushed) and the newline
    }
  }
  // {% generation %} / {% endgeneration %} markers are dropped (HF does the same).
  Source d;
  const std::string& t = c.text;
  size_t last = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (!StartsWith(t, i, "{%")) continue;
    size_t j = i + 2;
    bool lstrip = j < t.size() && t[j] == '-';
    if (lstrip) ++j;
    while (j < t.size() && WhitespaceAt(t, j)) j += WhitespaceAt(t, j);
    if (StartsWith(t, j, "end")) j += 3;
    if (!StartsWith(t, j, "generation")) continue;
    j += 10;
    while (j < t.size() && WhitespaceAt(t, j)) j += WhitespaceAt(t, j);
    bool rstrip = j < t.size() && t[j] == '-';
    if (rstrip) ++j;
    if (!StartsWith(t, j, "%}")) continue;
    j += 2;
    size_t after_end = j;
    while (after_end < t.size() && WhitespaceAt(t, after_end))
      after_end += WhitespaceAt(t, after_end);
    size_t end = i;
    while (lstrip && end > last) {
      // Step back over one whitespace character (ASCII or multi-byte).
      size_t k = end - 1;
      while (k > last && (static_cast<unsigned char>(t[k]) & 0xc0) == 0x80) --k;
      if (!WhitespaceAt(t, k) || k + WhitespaceAt(t, k) != end) break;
      end = k;
    }
    for (size_t k = last; k < end; ++k) d.Push(t[k], c.line[k]);
    if (!rstrip) {
      for (size_t k = j; k < after_end; ++k) d.Push(t[k], c.line[k]);
    }
    last = after_end;
    i = after_end - 1;
  }
  for (size_t k = last; k < t.size(); ++k) d.Push(t[k], c.line[k]);
  return d;
}

bool IsWordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}

class Lexer {
 public:
  explicit Lexer(Source src) : s_(std::move(src)), src_(s_.text) {}

  std::vector<Token> Run() {
    while (pos_ < src_.size()) {
      TokenType* last = tokens_.empty() ? nullptr : &tokens_.back().type;
      bool after_block = !last || *last == TokenType::kCloseStatement ||
                         *last == TokenType::kCloseExpression || *last == TokenType::kComment;
      if (after_block) {
        size_t end = pos_;
        while (true) {
          end = src_.find('{', end);
          if (end == std::string::npos) {
            end = src_.size();
            break;
          }
          char next = end + 1 < src_.size() ? src_[end + 1] : '\0';
          if (next == '%' || next == '{' || next == '#') break;
          ++end;
        }
        if (end > pos_) {
          Push(TokenType::kText, src_.substr(pos_, end - pos_));
          pos_ = end;
          continue;
        }
        if (TryRaw()) continue;
      }
      if (src_[pos_] == '{') {
        char next = At(pos_ + 1);
        if (next == '#') {
          LexComment();
          continue;
        }
        if (At(pos_ + 2) == '-' && (next == '%' || next == '{')) {
          StripTrailingWhitespace();
          Push(next == '%' ? TokenType::kOpenStatement : TokenType::kOpenExpression,
               next == '%' ? "{%" : "{{");
          pos_ += 3;
          continue;
        }
      }
      SkipWhitespaceInTag();
      char ch = src_[pos_];
      if (ch == '-' && At(pos_ + 2) == '}' && (At(pos_ + 1) == '%' || At(pos_ + 1) == '}')) {
        bool stmt = At(pos_ + 1) == '%';
        Push(stmt ? TokenType::kCloseStatement : TokenType::kCloseExpression, stmt ? "%}" : "}}");
        pos_ += 3;
        SkipLeadingWhitespace();
        continue;
      }
      if (ch == '-' || ch == '+') {
        if (!last || *last == TokenType::kText) Fail("Unexpected character: ", ch);
        bool binary = *last == TokenType::kIdentifier || *last == TokenType::kNumber ||
                      *last == TokenType::kString || *last == TokenType::kCloseParen ||
                      *last == TokenType::kCloseBracket;
        if (!binary) {
          ++pos_;
          std::string num = ConsumeDigits();
          if (!num.empty() && At(pos_) == '.' && IsDigit(At(pos_ + 1))) {
            ++pos_;
            num += "." + ConsumeDigits();
          }
          Push(num.empty() ? TokenType::kUnary : TokenType::kNumber, std::string(1, ch) + num);
          continue;
        }
      }
      if (LexOperator()) continue;
      if (ch == '\'' || ch == '"') {
        ++pos_;
        Push(TokenType::kString, ConsumeString(ch));
        ++pos_;
        continue;
      }
      if (IsDigit(ch)) {
        std::string num = ConsumeDigits();
        bool after_dot = !tokens_.empty() && tokens_.back().type == TokenType::kDot;
        if (!after_dot && At(pos_) == '.' && IsDigit(At(pos_ + 1))) {
          ++pos_;
          num += "." + ConsumeDigits();
        }
        Push(TokenType::kNumber, num);
        continue;
      }
      if (IsWordChar(ch)) {
        size_t start = pos_;
        while (pos_ < src_.size() && IsWordChar(src_[pos_])) ++pos_;
        if (pos_ >= src_.size()) Fail("Unexpected end of input");
        Push(TokenType::kIdentifier, src_.substr(start, pos_ - start));
        continue;
      }
      Fail("Unexpected character: ", ch);
    }
    return std::move(tokens_);
  }

 private:
  char At(size_t i) const { return i < src_.size() ? src_[i] : '\0'; }
  int Line() const { return s_.line.empty() ? 1 : s_.line[std::min(pos_, s_.line.size() - 1)]; }

  template <typename... Args>
  [[noreturn]] void Fail(const Args&... args) {
    throw TemplateError(moeserve::detail::Concat(args...), Line());
  }

  void Push(TokenType type, std::string value) {
    tokens_.push_back({type, std::move(value), Line()});
  }

  void StripTrailingWhitespace() {
    if (tokens_.empty() || tokens_.back().type != TokenType::kText) return;
    std::string& v = tokens_.back().value;
    v = JsTrim(v, false, true);
    if (v.empty()) tokens_.pop_back();
  }

  void SkipLeadingWhitespace() {
    while (pos_ < src_.size()) {
      size_t w = WhitespaceAt(src_, pos_);
      if (!w) break;
      pos_ += w;
    }
  }

  // HF's consumeWhile(isWhitespace) errors when the input ends inside a tag.
  void SkipWhitespaceInTag() {
    while (pos_ < src_.size()) {
      size_t w = WhitespaceAt(src_, pos_);
      if (!w) return;
      pos_ += w;
      if (pos_ >= src_.size()) Fail("Unexpected end of input");
    }
  }

  std::string ConsumeDigits() {
    size_t start = pos_;
    while (pos_ < src_.size() && IsDigit(src_[pos_])) ++pos_;
    if (pos_ >= src_.size()) Fail("Unexpected end of input");
    return src_.substr(start, pos_ - start);
  }

  void LexComment() {
    pos_ += 2;
    bool strip_before = At(pos_) == '-';
    if (strip_before) ++pos_;
    size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) Fail("Missing end of comment tag");
    std::string comment = src_.substr(pos_, end - pos_);
    bool strip_after = !comment.empty() && comment.back() == '-';
    if (strip_after) comment.pop_back();
    if (strip_before) StripTrailingWhitespace();
    Push(TokenType::kComment, comment);
    pos_ = end + 2;
    if (strip_after) SkipLeadingWhitespace();
  }

  // `{% raw %}...{% endraw %}` (Python Jinja; HF has no raw blocks): the body becomes text.
  bool TryRaw() {
    size_t i = pos_;
    if (!StartsWith(src_, i, "{%")) return false;
    i += 2;
    bool lstrip = At(i) == '-';
    if (lstrip) ++i;
    while (WhitespaceAt(src_, i) && i < src_.size()) i += WhitespaceAt(src_, i);
    if (!StartsWith(src_, i, "raw")) return false;
    i += 3;
    while (i < src_.size() && WhitespaceAt(src_, i)) i += WhitespaceAt(src_, i);
    bool rstrip = At(i) == '-';
    if (rstrip) ++i;
    if (!StartsWith(src_, i, "%}")) return false;
    i += 2;
    // Find {%-? endraw -?%}
    size_t search = i;
    while (true) {
      size_t open = src_.find("{%", search);
      if (open == std::string::npos) Fail("Missing {% endraw %}");
      size_t j = open + 2;
      bool end_lstrip = At(j) == '-';
      if (end_lstrip) ++j;
      while (j < src_.size() && WhitespaceAt(src_, j)) j += WhitespaceAt(src_, j);
      if (!StartsWith(src_, j, "endraw")) {
        search = open + 2;
        continue;
      }
      j += 6;
      while (j < src_.size() && WhitespaceAt(src_, j)) j += WhitespaceAt(src_, j);
      bool end_rstrip = At(j) == '-';
      if (end_rstrip) ++j;
      if (!StartsWith(src_, j, "%}")) {
        search = open + 2;
        continue;
      }
      if (lstrip) StripTrailingWhitespace();
      std::string body = src_.substr(i, open - i);
      if (rstrip) body = JsTrim(body, true, false);
      if (end_lstrip) body = JsTrim(body, false, true);
      // A comment token keeps the "after a block" state so following text lexes as text.
      if (!body.empty()) Push(TokenType::kText, body);
      Push(TokenType::kComment, "");
      pos_ = j + 2;
      if (end_rstrip) SkipLeadingWhitespace();
      return true;
    }
  }

  bool LexOperator() {
    struct Rule {
      const char* seq;
      TokenType type;
    };
    static const Rule kRules[] = {
        {"{%", TokenType::kOpenStatement},  {"%}", TokenType::kCloseStatement},
        {"{{", TokenType::kOpenExpression}, {"}}", TokenType::kCloseExpression},
        {"(", TokenType::kOpenParen},       {")", TokenType::kCloseParen},
        {"{", TokenType::kOpenBrace},       {"}", TokenType::kCloseBrace},
        {"[", TokenType::kOpenBracket},     {"]", TokenType::kCloseBracket},
        {",", TokenType::kComma},           {".", TokenType::kDot},
        {":", TokenType::kColon},           {"|", TokenType::kPipe},
        {"<=", TokenType::kComparison},     {">=", TokenType::kComparison},
        {"==", TokenType::kComparison},     {"!=", TokenType::kComparison},
        {"<", TokenType::kComparison},      {">", TokenType::kComparison},
        {"+", TokenType::kAdditive},        {"-", TokenType::kAdditive},
        {"~", TokenType::kAdditive},        {"**", TokenType::kPower},
        {"*", TokenType::kMultiplicative},  {"//", TokenType::kMultiplicative},
        {"/", TokenType::kMultiplicative},  {"%", TokenType::kMultiplicative},
        {"=", TokenType::kEquals},
    };
    for (const Rule& r : kRules) {
      std::string_view seq = r.seq;
      if (seq == "}}" && brace_depth_ > 0) continue;
      if (!StartsWith(src_, pos_, seq)) continue;
      Push(r.type, std::string(seq));
      if (r.type == TokenType::kOpenExpression) brace_depth_ = 0;
      if (r.type == TokenType::kOpenBrace) ++brace_depth_;
      if (r.type == TokenType::kCloseBrace) --brace_depth_;
      pos_ += seq.size();
      return true;
    }
    return false;
  }

  std::string ConsumeString(char quote) {
    std::string out;
    while (true) {
      if (pos_ >= src_.size()) Fail("Unexpected end of input");
      char c = src_[pos_];
      if (c == quote) return out;
      ++pos_;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= src_.size()) Fail("Unexpected end of input");
      char e = src_[pos_++];
      if (e == 'x' || e == 'u') {
        size_t n = e == 'x' ? 2 : 4;
        std::string hex = src_.substr(pos_, n);
        bool ok = hex.size() == n;
        for (char h : hex) ok = ok && std::isxdigit(static_cast<unsigned char>(h));
        if (!ok) Fail("Invalid hexadecimal escape sequence: \\", e, hex);
        char32_t cp = static_cast<char32_t>(std::stoul(hex, nullptr, 16));
        // A lone surrogate cannot be encoded in UTF-8: use U+FFFD like a JS->UTF-8 encoder.
        if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;
        AppendUtf8(out, cp);
        pos_ += n;
        continue;
      }
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'v':
          out += '\v';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        default:
          Fail("Unexpected escaped character: ", e);
      }
    }
  }

  Source s_;
  const std::string& src_;
  size_t pos_ = 0;
  int brace_depth_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> Tokenize(std::string_view source) {
  return Lexer(Preprocess(source)).Run();
}

}  // namespace moeserve::chat::jinja
