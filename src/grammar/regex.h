// Regular expressions (the PCRE2 subset structured-output users write) compiled to grammar
// expressions, for `guided_regex` / `structured_outputs.regex` and JSON Schema `pattern`.
//
// Supported: literals and escapes (\n \t \r \f \v \0 \xHH \x{H..} \uHHHH, escaped
// metacharacters), `.` (any code point but \n, as PCRE2 without DOTALL), classes [...] / [^...]
// with ranges, \d \w \s \D \W \S (ASCII, as PCRE2 without UCP) inside and outside classes,
// groups ( ), (?: ), (?<name> ), (?P<name> ), alternation, quantifiers * + ? {m} {m,} {m,n} and
// their lazy forms (same language under a full match), ^ at the very start and $ at the very end.
//
// Anything else is an error naming the construct: lookaround, backreferences, \b, \p{..},
// possessive quantifiers, inline flags, anchors in the middle, POSIX classes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "grammar/ast.h"

namespace moeserve::grammar {

struct RegexParts {
  Expr expr;
  bool anchored_start = false;  // the pattern began with ^
  bool anchored_end = false;    // the pattern ended with $
};

// Throws GrammarError "regex at offset N: ..." for unsupported or malformed patterns.
RegexParts ParseRegex(std::string_view pattern);

// A grammar whose root matches exactly the strings the regex fully matches (anchors optional).
GrammarAst RegexToGrammar(std::string_view pattern);

// A grammar whose root is one of the given strings.
GrammarAst ChoiceToGrammar(const std::vector<std::string>& choices);

}  // namespace moeserve::grammar
