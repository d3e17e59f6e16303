#include "grammar/regex.h"

#include <algorithm>
#include <cctype>

namespace moeserve::grammar {
namespace {

using Ranges = std::vector<CodepointRange>;

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}};  // \t \n \v \f \r and space

Ranges Complement(Ranges r) {
  std::sort(r.begin(), r.end(), [](auto& a, auto& b) { return a.lo < b.lo; });
  Ranges out;
  uint32_t next = 0;
  for (const CodepointRange& x : r) {
    if (x.lo > next) out.push_back({next, x.lo - 1});
    next = std::max(next, x.hi + 1);
  }
  if (next <= kMaxCodepoint) out.push_back({next, kMaxCodepoint});
  return out;
}

class RegexParser {
 public:
  explicit RegexParser(std::string_view p) : p_(p) {}

  RegexParts Parse() {
    RegexParts parts;
    if (Peek() == '^') {
      parts.anchored_start = true;
      ++pos_;
    }
    parts.expr = ParseAlternation();
    if (pos_ < p_.size()) {
      if (Peek() == ')') Fail("unbalanced ')'");
      Fail("unexpected '", Peek(), "'");
    }
    parts.anchored_end = anchored_end_;
    return parts;
  }

 private:
  template <typename... Args>
  [[noreturn]] void Fail(const Args&... args) const {
    throw GrammarError(detail::Concat("regex at offset ", pos_, ": ", args...));
  }
  char Peek(size_t k = 0) const { return pos_ + k < p_.size() ? p_[pos_ + k] : '\0'; }
  bool AtEnd() const { return pos_ >= p_.size(); }

  Expr ParseAlternation() {
    std::vector<Expr> alts;
    alts.push_back(ParseSequence());
    while (Peek() == '|' && !AtEnd()) {
      ++pos_;
      alts.push_back(ParseSequence());
    }
    return Expr::Alt(std::move(alts));
  }

  Expr ParseSequence() {
    std::vector<Expr> items;
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      if (Peek() == '$') {
        ++pos_;
        if (!AtEnd() || depth_ > 0) Fail("'$' is only supported at the end of the pattern");
        anchored_end_ = true;
        break;
      }
      if (Peek() == '^') Fail("'^' is only supported at the start of the pattern");
      items.push_back(ParseQuantified(ParseAtom()));
    }
    return Expr::Seq(std::move(items));
  }

  int ParseNumber() {
    const size_t start = pos_;
    long v = 0;
    while (Peek() >= '0' && Peek() <= '9') {
      v = v * 10 + (Peek() - '0');
      if (v > kMaxRepeat) Fail("repetition count above ", kMaxRepeat);
      ++pos_;
    }
    if (pos_ == start) Fail("expected a number in a repetition count");
    return static_cast<int>(v);
  }

  Expr ParseQuantified(Expr atom) {
    for (;;) {
      int min, max;
      const char c = Peek();
      if (c == '*') {
        min = 0, max = kUnbounded;
        ++pos_;
      } else if (c == '+') {
        min = 1, max = kUnbounded;
        ++pos_;
      } else if (c == '?') {
        min = 0, max = 1;
        ++pos_;
      } else if (c == '{' && Peek(1) >= '0' && Peek(1) <= '9') {
        ++pos_;
        min = max = ParseNumber();
        if (Peek() == ',') {
          ++pos_;
          max = Peek() == '}' ? kUnbounded : ParseNumber();
        }
        if (Peek() != '}') Fail("expected '}' in a repetition count");
        ++pos_;
        if (max != kUnbounded && max < min) Fail("repetition {", min, ",", max, "} has max < min");
      } else {
        return atom;
      }
      if (Peek() == '?') ++pos_;  // lazy: the same set of full matches
      if (Peek() == '+') Fail("possessive quantifiers are not supported");
      atom = Expr::Repeat(std::move(atom), min, max);
    }
  }

  Expr ParseAtom() {
    const char c = Peek();
    if (c == '(') return ParseGroup();
    if (c == '[') return Expr::Class(ParseClass());
    if (c == '.') {
      ++pos_;
      return Expr::Class({{'\n', '\n'}}, true);
    }
    if (c == '*' || c == '+' || c == '?') Fail("quantifier '", c, "' has nothing to repeat");
    if (c == '\\') {
      Ranges ranges;
      const uint32_t cp = ParseEscape(ranges, false);
      if (!ranges.empty()) return Expr::Class(std::move(ranges));
      std::string s;
      AppendUtf8(cp, s);
      return Expr::Literal(std::move(s));
    }
    std::string s;
    AppendUtf8(ParseUtf8(), s);
    return Expr::Literal(std::move(s));
  }

  Expr ParseGroup() {
    ++pos_;
    if (Peek() == '?') {
      const char k = Peek(1);
      if (k == ':') {
        pos_ += 2;
      } else if (k == '<' && Peek(2) != '=' && Peek(2) != '!') {
        pos_ = p_.find('>', pos_) == std::string_view::npos ? p_.size() : p_.find('>', pos_) + 1;
      } else if (k == 'P' && Peek(2) == '<') {
        pos_ = p_.find('>', pos_) == std::string_view::npos ? p_.size() : p_.find('>', pos_) + 1;
      } else if (k == '=' || k == '!' || k == '<') {
        Fail("lookaround assertions are not supported");
      } else {
        Fail("inline flags and special groups '(?", k, "' are not supported");
      }
    }
    ++depth_;
    Expr inner = ParseAlternation();
    --depth_;
    if (Peek() != ')' || AtEnd()) Fail("missing ')'");
    ++pos_;
    return inner;
  }

  uint32_t ParseUtf8() {
    const auto c = static_cast<unsigned char>(p_[pos_]);
    const int len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (len == 0 || pos_ + len > p_.size()) Fail("invalid UTF-8");
    uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (int i = 1; i < len; ++i) cp = (cp << 6) | (p_[pos_ + i] & 0x3F);
    pos_ += len;
    return cp;
  }

  uint32_t ParseHex(size_t max_digits) {
    uint32_t v = 0;
    size_t n = 0;
    while (n < max_digits && std::isxdigit(static_cast<unsigned char>(Peek()))) {
      const char h = Peek();
      v = v * 16 + (h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
      ++pos_, ++n;
      if (v > kMaxCodepoint) Fail("code point above U+10FFFF");
    }
    if (n == 0) Fail("expected hex digits");
    return v;
  }

  // After a backslash: a class escape fills `ranges`; otherwise returns the code point.
  uint32_t ParseEscape(Ranges& ranges, bool in_class) {
    ++pos_;
    if (AtEnd()) Fail("pattern ends with a backslash");
    const char e = p_[pos_++];
    switch (e) {
      case 'd':
        ranges = kDigit;
        return 0;
      case 'w':
        ranges = kWord;
        return 0;
      case 's':
        ranges = kSpace;
        return 0;
      case 'D':
        ranges = Complement(kDigit);
        return 0;
      case 'W':
        ranges = Complement(kWord);
        return 0;
      case 'S':
        ranges = Complement(kSpace);
        return 0;
      case 'n':
        return '\n';
      case 't':
        return '\t';
      case 'r':
        return '\r';
      case 'f':
        return '\f';
      case 'v':
        return '\v';
      case '0':
        return 0;
      case 'e':
        return 0x1B;
      case 'a':
        return 0x07;
      case 'u':
        return ParseHex(4);
      case 'x':
        if (Peek() == '{') {
          ++pos_;
          const uint32_t v = ParseHex(8);
          if (Peek() != '}') Fail("expected '}' after \\x{");
          ++pos_;
          return v;
        }
        return ParseHex(2);
      case 'b':
        if (in_class) return 0x08;
        Fail("word boundaries (\\b) are not supported");
      case 'B':
      case 'A':
      case 'z':
      case 'Z':
      case 'G':
        Fail("the assertion \\", e, " is not supported");
      case 'p':
      case 'P':
        Fail("Unicode properties (\\", e, "{...}) are not supported");
      case 'k':
      case 'g':
        Fail("backreferences are not supported");
      default:
        if (e >= '1' && e <= '9') Fail("backreferences are not supported");
        if (std::isalnum(static_cast<unsigned char>(e))) Fail("unknown escape \\", e);
        --pos_;
        return ParseUtf8();  // an escaped metacharacter or any other symbol stands for itself
    }
  }

  Ranges ParseClass() {
    const size_t start = pos_++;
    const bool negated = Peek() == '^';
    if (negated) ++pos_;
    Ranges ranges;
    bool first = true;
    while (AtEnd() || Peek() != ']' || first) {
      if (AtEnd()) {
        pos_ = start;
        Fail("unterminated character class");
      }
      if (Peek() == '[' && Peek(1) == ':') Fail("POSIX classes are not supported");
      first = false;
      uint32_t lo;
      if (Peek() == '\\') {
        Ranges escape;
        lo = ParseEscape(escape, true);
        if (!escape.empty()) {
          ranges.insert(ranges.end(), escape.begin(), escape.end());
          continue;
        }
      } else {
        lo = ParseUtf8();
      }
      uint32_t hi = lo;
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < p_.size()) {
        ++pos_;
        Ranges escape;
        hi = Peek() == '\\' ? ParseEscape(escape, true) : ParseUtf8();
        if (!escape.empty()) Fail("a class escape cannot end a range");
        if (hi < lo) Fail("character range out of order");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    return negated ? Complement(std::move(ranges)) : ranges;
  }

  std::string_view p_;
  size_t pos_ = 0;
  int depth_ = 0;
  bool anchored_end_ = false;
};

}  // namespace

RegexParts ParseRegex(std::string_view pattern) {
  return RegexParser(pattern).Parse();
}

GrammarAst RegexToGrammar(std::string_view pattern) {
  GrammarAst ast;
  ast.root = ast.RuleIndex("root");
  ast.rules[ast.root].body = ParseRegex(pattern).expr;
  return ast;
}

GrammarAst ChoiceToGrammar(const std::vector<std::string>& choices) {
  if (choices.empty()) throw GrammarError("choice needs at least one string");
  std::vector<Expr> alts;
  for (const std::string& c : choices) alts.push_back(c.empty() ? Expr::Empty() : Expr::Literal(c));
  GrammarAst ast;
  ast.root = ast.RuleIndex("root");
  ast.rules[ast.root].body = Expr::Alt(std::move(alts));
  return ast;
}

}  // namespace moeserve::grammar
