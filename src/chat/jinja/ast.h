// Syntax tree of a parsed template. Immutable after parsing, so one tree serves concurrent renders.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "chat/jinja/value.h"

namespace moeserve::chat::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // literal
    kIdent,     // name
    kArray,     // items
    kTuple,     // items
    kObject,    // items = key0, value0, key1, value1, ...
    kMember,    // a[b] / a.b (b is a literal for the dot form), b may be a kSlice
    kSlice,     // a:b:c, each may be null
    kCall,      // a(items...)
    kFilter,    // a | name(items...); has_args for the call form
    kTest,      // a is [not] name(items...)
    kUnary,     // name a   (name: not, -, +)
    kBinary,    // a name b
    kTernary,   // b if a else c
    kSelect,    // a if b   (no else: undefined when b is false)
    kKwarg,     // name=a (in calls and macro parameters)
    kSpread,    // *a
    kKwSpread,  // **a
  };
  Kind kind;
  int line = 0;
  std::string name;
  Value literal;
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;
  bool negate = false;
  bool has_args = false;
  int depth = 1;  // height of this subtree (bounded by the parser)
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    kText,
    kOutput,
    kIf,
    kFor,
    kSet,
    kMacro,
    kCallBlock,
    kFilterBlock,
    kBreak,
    kContinue
  };
  Kind kind;
  int line = 0;
  std::string text;             // kText
  ExprPtr expr;                 // output / if test / for iterable / set value / call expression
  ExprPtr target;               // for loop variable(s) / set target
  ExprPtr filter;               // kFilterBlock: a kFilter with no operand
  Body body, alternate;         // if: then / else; for: body / else; set: block body
  std::string name;             // macro name
  std::vector<ExprPtr> params;  // macro / call-block parameters (kIdent or kKwarg)
  bool uses_caller = false, uses_kwargs = false, uses_varargs = false;
};

struct Program {
  Body body;
};

// Throws TemplateError with the line on syntax errors.
std::unique_ptr<Program> ParseTemplate(std::string_view source);

}  // namespace moeserve::chat::jinja
