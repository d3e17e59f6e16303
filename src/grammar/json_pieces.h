// Building blocks of the JSON Schema front end (internal to the grammar layer).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "grammar/ast.h"

namespace moeserve::grammar::json {

// Every number the grammar writes has bounded digit runs, so a model cannot go on emitting
// digits forever (llama.cpp's and xgrammar's JSON grammars bound them too): an integer part of
// at most 19 digits (every int64), a fraction of at most 16 (a double's precision, and more),
// an exponent of at most 3 (a double's reaches 308). Larger or finer values are out of reach of
// the model, which is the point: no JSON parser keeps them exactly either.
inline constexpr int kMaxIntegerDigits = 19;
inline constexpr int kMaxFractionDigits = 16;
inline constexpr int kMaxExponentDigits = 3;

// The JSON integers in [lo, hi] (a missing side is unbounded, up to kMaxIntegerDigits digits),
// written without leading zeros, as an expression over digits and '-'. Throws GrammarError when
// the range is empty.
Expr IntegerRange(std::optional<int64_t> lo, std::optional<int64_t> hi);

// An integer bound of a number range, and whether the bound itself is excluded.
struct NumberBound {
  int64_t value = 0;
  bool exclusive = false;
};

// The JSON numbers x with lo <= x <= hi (< / > when exclusive; a missing side is unbounded),
// written as -?(0|[1-9][0-9]{0,18})(.[0-9]{1,16})? (no exponent: a bounded number has no need of
// one). Throws GrammarError when no number lies in the range.
Expr NumberRange(std::optional<NumberBound> lo, std::optional<NumberBound> hi);

// Any JSON number within the digit bounds above: -?(0|[1-9][0-9]{0,18})(.[0-9]{1,16})?
// ([eE][+-]?[0-9]{1,3})?
Expr AnyNumber();

// `e` is over decoded code points (a regex); the result matches the JSON string contents (no
// quotes) that decode to a string `e` matches: '"', '\' and control characters appear only as
// escapes (the short ones where JSON has them, else \u00XX).
Expr EscapeForJsonString(const Expr& e);

// One character inside a JSON string: any code point but '"', '\' and controls, or an escape.
Expr JsonStringChar();

// The regex (regex.h syntax, anchored) for a supported string format, or "" for any other
// format name. Each accepts a subset of the format that every validator accepts (e.g. no
// February 29, no leap seconds).
std::string_view FormatRegex(std::string_view format);

}  // namespace moeserve::grammar::json
