#include "grammar/ast.h"

#include <cstdio>

namespace moeserve::grammar {

int GrammarAst::RuleIndex(const std::string& name) {
  const int found = FindRule(name);
  if (found >= 0) return found;
  rules.push_back({name, Expr::Empty()});
  return static_cast<int>(rules.size()) - 1;
}

int GrammarAst::FindRule(const std::string& name) const {
  for (size_t i = 0; i < rules.size(); ++i)
    if (rules[i].name == name) return static_cast<int>(i);
  return -1;
}

void AppendUtf8(uint32_t cp, std::string& out) {
  MOESERVE_CHECK(cp <= kMaxCodepoint, "code point ", cp);
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

namespace {

// Code points as GBNF escapes where needed; UTF-8 bytes of literals are shown as \xHH when not
// printable ASCII, which the GBNF parser reads back as code points, so only ASCII round-trips.
void AppendEscaped(uint32_t cp, bool in_class, std::string& out) {
  char buf[16];
  if (cp == '\\' || cp == '"' || (in_class && (cp == ']' || cp == '-' || cp == '^' || cp == '['))) {
    out += '\\';
    out += static_cast<char>(cp);
  } else if (cp == '\n') {
    out += "\\n";
  } else if (cp == '\t') {
    out += "\\t";
  } else if (cp == '\r') {
    out += "\\r";
  } else if (cp < 0x20 || cp == 0x7F) {
    std::snprintf(buf, sizeof buf, "\\x%02X", cp);
    out += buf;
  } else if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp <= 0xFFFF) {
    std::snprintf(buf, sizeof buf, "\\u%04X", cp);
    out += buf;
  } else {
    std::snprintf(buf, sizeof buf, "\\U%08X", cp);
    out += buf;
  }
}

void Print(const GrammarAst& ast, const Expr& e, bool nested, std::string& out) {
  switch (e.kind) {
    case Expr::Kind::kEmpty:
      out += "\"\"";
      return;
    case Expr::Kind::kLiteral:
      out += '"';
      for (unsigned char c : e.text) AppendEscaped(c, false, out);
      out += '"';
      return;
    case Expr::Kind::kClass:
    case Expr::Kind::kBytes:
      out += e.negated ? "[^" : "[";
      for (const CodepointRange& r : e.ranges) {
        AppendEscaped(r.lo, true, out);
        if (r.hi != r.lo) {
          out += '-';
          AppendEscaped(r.hi, true, out);
        }
      }
      out += ']';
      return;
    case Expr::Kind::kRule:
      out += ast.rules[e.rule].name;
      return;
    case Expr::Kind::kSeq:
    case Expr::Kind::kAlt: {
      const bool alt = e.kind == Expr::Kind::kAlt;
      if (nested) out += '(';
      for (size_t i = 0; i < e.children.size(); ++i) {
        if (i > 0) out += alt ? " | " : " ";
        Print(ast, e.children[i], true, out);
      }
      if (nested) out += ')';
      return;
    }
    case Expr::Kind::kRepeat:
      Print(ast, e.children[0], true, out);
      if (e.min == 0 && e.max == kUnbounded) {
        out += '*';
      } else if (e.min == 1 && e.max == kUnbounded) {
        out += '+';
      } else if (e.min == 0 && e.max == 1) {
        out += '?';
      } else if (e.max == kUnbounded) {
        out += "{" + std::to_string(e.min) + ",}";
      } else if (e.min == e.max) {
        out += "{" + std::to_string(e.min) + "}";
      } else {
        out += "{" + std::to_string(e.min) + "," + std::to_string(e.max) + "}";
      }
      return;
  }
}

}  // namespace

std::string ToGbnf(const GrammarAst& ast) {
  std::string out;
  for (const AstRule& rule : ast.rules) {
    out += rule.name + " ::= ";
    Print(ast, rule.body, false, out);
    out += '\n';
  }
  return out;
}

}  // namespace moeserve::grammar
