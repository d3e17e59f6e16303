// The grammar as written: named rules whose bodies are expression trees over literals, Unicode
// character classes and references to other rules. Every front end (GBNF text, JSON Schema, regex,
// choice) produces this form; compile.h turns it into per-rule byte automata for matching.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"

namespace moeserve::grammar {

// A grammar the user gave cannot be used: bad syntax (with line:column), an undefined rule, an
// unsupported JSON Schema keyword (with its JSON path), a rule that can never finish. The server
// answers it with a 400 carrying the message.
class GrammarError : public Error {
 public:
  using Error::Error;
};

// Inclusive range of Unicode code points.
struct CodepointRange {
  uint32_t lo = 0, hi = 0;
};

inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;
inline constexpr int kUnbounded = -1;
// Largest m or n in x{m,n}: each repetition is a copy of x's automaton.
inline constexpr int kMaxRepeat = 10000;

struct Expr {
  enum class Kind : uint8_t {
    kEmpty,    // matches ""
    kLiteral,  // the bytes of `text`
    kClass,    // one code point in `ranges` (or not in them when `negated`), UTF-8 encoded
    kBytes,    // one byte in `ranges` (values <= 255); for raw-byte grammars
    kRule,     // a reference to rule `rule` (index into GrammarAst::rules)
    kSeq,      // children one after the other
    kAlt,      // one of the children
    kRepeat,   // children[0] between min and max (kUnbounded) times
  };
  Kind kind = Kind::kEmpty;
  std::string text;                    // kLiteral
  std::vector<CodepointRange> ranges;  // kClass, kBytes
  bool negated = false;                // kClass
  int rule = -1;                       // kRule
  std::vector<Expr> children;          // kSeq, kAlt, kRepeat
  int min = 0, max = kUnbounded;       // kRepeat

  static Expr Empty() { return Expr{}; }
  static Expr Literal(std::string bytes) {
    Expr e;
    e.kind = Kind::kLiteral;
    e.text = std::move(bytes);
    return e;
  }
  static Expr Class(std::vector<CodepointRange> ranges, bool negated = false) {
    Expr e;
    e.kind = Kind::kClass;
    e.ranges = std::move(ranges);
    e.negated = negated;
    return e;
  }
  static Expr Rule(int rule) {
    Expr e;
    e.kind = Kind::kRule;
    e.rule = rule;
    return e;
  }
  static Expr Seq(std::vector<Expr> children) { return Group(Kind::kSeq, std::move(children)); }
  static Expr Alt(std::vector<Expr> children) { return Group(Kind::kAlt, std::move(children)); }
  static Expr Repeat(Expr child, int min, int max) {
    Expr e;
    e.kind = Kind::kRepeat;
    e.children.push_back(std::move(child));
    e.min = min;
    e.max = max;
    return e;
  }

 private:
  static Expr Group(Kind kind, std::vector<Expr> children) {
    if (children.size() == 1) return std::move(children[0]);
    Expr e;
    e.kind = children.empty() ? Kind::kEmpty : kind;
    e.children = std::move(children);
    return e;
  }
};

struct AstRule {
  std::string name;
  Expr body;
};

struct GrammarAst {
  std::vector<AstRule> rules;
  int root = -1;  // index of the start rule

  // Index of rule `name`, adding an empty placeholder (body kEmpty) when unknown.
  int RuleIndex(const std::string& name);
  // -1 when there is no such rule.
  int FindRule(const std::string& name) const;
};

// Appends the UTF-8 encoding of `cp` (<= kMaxCodepoint) to `out`.
void AppendUtf8(uint32_t cp, std::string& out);

// Readable GBNF text of the grammar (for errors, debugging and tests).
std::string ToGbnf(const GrammarAst& ast);

}  // namespace moeserve::grammar
