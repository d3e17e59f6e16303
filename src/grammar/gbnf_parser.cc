#include "grammar/gbnf_parser.h"

#include <unordered_map>

namespace moeserve::grammar {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  GrammarAst Parse(std::string_view root_name) {
    SkipSpace(true);
    while (pos_ < text_.size()) {
      ParseRule();
      SkipSpace(true);
    }
    for (size_t i = 0; i < ast_.rules.size(); ++i)
      if (!defined_[i]) Fail(first_use_[i], "undefined rule '", ast_.rules[i].name, "'");
    ast_.root = ast_.FindRule(std::string(root_name));
    if (ast_.root < 0) throw GrammarError(detail::Concat("GBNF: no '", root_name, "' rule"));
    return std::move(ast_);
  }

 private:
  template <typename... Args>
  [[noreturn]] void Fail(size_t at, const Args&... args) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw GrammarError(detail::Concat("GBNF line ", line, " column ", col, ": ", args...));
  }

  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }

  // Spaces, tabs, comments; newlines too when `newlines`.
  void SkipSpace(bool newlines) {
    while (!AtEnd()) {
      const char c = Peek();
      if (c == ' ' || c == '\t' || ((c == '\n' || c == '\r') && newlines)) {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  // At a newline outside parentheses: does the rule continue on the next line? It ends at the
  // end of the text or where `name ::=` starts.
  bool RuleContinues() {
    size_t save = pos_;
    SkipSpace(true);
    bool continues = !AtEnd();
    if (continues) {
      size_t p = pos_;
      while (p < text_.size() && IsNameChar(text_[p])) ++p;
      while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
      if (p > pos_ && text_.substr(p, 3) == "::=") continues = false;
    }
    if (!continues) pos_ = save;
    return continues;
  }

  std::string ParseName() {
    const size_t start = pos_;
    while (!AtEnd() && IsNameChar(Peek())) ++pos_;
    if (pos_ == start) Fail(start, "expected a rule name");
    return std::string(text_.substr(start, pos_ - start));
  }

  int Reference(const std::string& name, size_t at) {
    const int index = ast_.RuleIndex(name);
    if (static_cast<size_t>(index) >= defined_.size()) {
      defined_.push_back(false);
      first_use_.push_back(at);
    }
    return index;
  }

  void ParseRule() {
    const size_t start = pos_;
    const std::string name = ParseName();
    SkipSpace(false);
    if (text_.substr(pos_, 3) != "::=") Fail(pos_, "expected '::=' after rule name '", name, "'");
    pos_ += 3;
    SkipSpace(true);
    const int index = Reference(name, start);
    if (defined_[index]) Fail(start, "rule '", name, "' is defined twice");
    defined_[index] = true;
    Expr body = ParseAlternatives(false);
    ast_.rules[index].body = std::move(body);
    if (!AtEnd() && Peek() != '\n' && Peek() != '\r')
      Fail(pos_, "unexpected '", Peek(), "' (expected a newline or the end)");
  }

  Expr ParseAlternatives(bool nested) {
    std::vector<Expr> alts;
    alts.push_back(ParseSequence(nested));
    while (Peek() == '|') {
      ++pos_;
      SkipSpace(true);
      alts.push_back(ParseSequence(nested));
    }
    return Expr::Alt(std::move(alts));
  }

  Expr ParseSequence(bool nested) {
    std::vector<Expr> items;
    for (;;) {
      SkipSpace(nested);
      if (!nested && (Peek() == '\n' || Peek() == '\r')) {
        if (!RuleContinues()) break;
        continue;
      }
      const char c = Peek();
      if (AtEnd() || c == '|' || c == ')') break;
      items.push_back(ParsePostfix(ParsePrimary()));
    }
    return Expr::Seq(std::move(items));
  }

  Expr ParsePrimary() {
    const size_t start = pos_;
    const char c = Peek();
    if (c == '"') return ParseLiteral();
    if (c == '[') return ParseClass();
    if (c == '.') {
      ++pos_;
      return Expr::Class({}, true);
    }
    if (c == '(') {
      ++pos_;
      SkipSpace(true);
      Expr inner = ParseAlternatives(true);
      SkipSpace(true);
      if (Peek() != ')') Fail(pos_, "expected ')' to close the group opened at offset ", start);
      ++pos_;
      return inner;
    }
    if (IsNameChar(c)) {
      std::string name = ParseName();
      SkipSpace(false);
      if (text_.substr(pos_, 3) == "::=") Fail(start, "missing newline before rule '", name, "'");
      return Expr::Rule(Reference(name, start));
    }
    Fail(start, "unexpected '", c, "'");
  }

  Expr ParsePostfix(Expr e) {
    for (;;) {
      const char c = Peek();
      if (c == '*') {
        e = Expr::Repeat(std::move(e), 0, kUnbounded);
      } else if (c == '+') {
        e = Expr::Repeat(std::move(e), 1, kUnbounded);
      } else if (c == '?') {
        e = Expr::Repeat(std::move(e), 0, 1);
      } else if (c == '{') {
        e = ParseCount(std::move(e));
        continue;
      } else {
        return e;
      }
      ++pos_;
    }
  }

  int ParseInt() {
    SkipSpace(false);
    const size_t start = pos_;
    long value = 0;
    while (Peek() >= '0' && Peek() <= '9') {
      value = value * 10 + (Peek() - '0');
      if (value > kMaxRepeat) Fail(start, "repetition count above ", kMaxRepeat);
      ++pos_;
    }
    if (pos_ == start) Fail(start, "expected a number");
    SkipSpace(false);
    return static_cast<int>(value);
  }

  Expr ParseCount(Expr e) {
    const size_t start = pos_++;
    const int min = ParseInt();
    int max = min;
    if (Peek() == ',') {
      ++pos_;
      SkipSpace(false);
      max = Peek() == '}' ? kUnbounded : ParseInt();
    }
    if (Peek() != '}') Fail(pos_, "expected '}' in repetition count");
    ++pos_;
    if (max != kUnbounded && max < min)
      Fail(start, "repetition {", min, ",", max, "} has max < min");
    return Expr::Repeat(std::move(e), min, max);
  }

  // One code point of a literal or class (handling escapes), as UTF-8 input is decoded.
  uint32_t ParseChar() {
    const size_t start = pos_;
    const auto c = static_cast<unsigned char>(Peek());
    if (c == '\\') {
      ++pos_;
      const char e = Peek();
      ++pos_;
      switch (e) {
        case 'n':
          return '\n';
        case 'r':
          return '\r';
        case 't':
          return '\t';
        case '0':
          return 0;
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
        case '\'':
          return static_cast<unsigned char>(e);
        case 'x':
          return ParseHex(2, start);
        case 'u':
          return ParseHex(4, start);
        case 'U':
          return ParseHex(8, start);
        default:
          Fail(start, "unknown escape '\\", e, "'");
      }
    }
    if (c < 0x80) {
      ++pos_;
      return c;
    }
    const int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (len == 0 || pos_ + len > text_.size()) Fail(start, "invalid UTF-8 in the grammar text");
    uint32_t cp = c & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
      const auto b = static_cast<unsigned char>(text_[pos_ + i]);
      if ((b & 0xC0) != 0x80) Fail(start, "invalid UTF-8 in the grammar text");
      cp = (cp << 6) | (b & 0x3F);
    }
    pos_ += len;
    return cp;
  }

  uint32_t ParseHex(int digits, size_t start) {
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const int d = HexValue(Peek());
      if (d < 0) Fail(start, "expected ", digits, " hex digits");
      value = value * 16 + d;
      ++pos_;
    }
    if (value > kMaxCodepoint) Fail(start, "code point above U+10FFFF");
    return value;
  }

  Expr ParseLiteral() {
    const size_t start = pos_++;
    std::string bytes;
    while (Peek() != '"') {
      if (AtEnd() || Peek() == '\n') Fail(start, "unterminated string literal");
      AppendUtf8(ParseChar(), bytes);
    }
    ++pos_;
    return bytes.empty() ? Expr::Empty() : Expr::Literal(std::move(bytes));
  }

  Expr ParseClass() {
    const size_t start = pos_++;
    bool negated = false;
    if (Peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CodepointRange> ranges;
    while (Peek() != ']') {
      if (AtEnd() || Peek() == '\n') Fail(start, "unterminated character class");
      const uint32_t lo = ParseChar();
      uint32_t hi = lo;
      if (Peek() == '-' && Peek(1) != ']' && Peek(1) != '\n' && Peek(1) != '\0') {
        ++pos_;
        hi = ParseChar();
        if (hi < lo) Fail(start, "character range out of order");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    if (ranges.empty() && !negated) Fail(start, "empty character class matches nothing");
    return Expr::Class(std::move(ranges), negated);
  }

  std::string_view text_;
  size_t pos_ = 0;
  GrammarAst ast_;
  std::vector<bool> defined_;      // by rule index
  std::vector<size_t> first_use_;  // by rule index: offset of the first mention
};

}  // namespace

GrammarAst ParseGbnf(std::string_view text, std::string_view root_rule) {
  return Parser(text).Parse(root_rule);
}

}  // namespace moeserve::grammar
