// GBNF, llama.cpp's grammar text form, so users can bring the grammars they already have:
//
//   root   ::= object            # the start rule is `root` (a comment runs to the line's end)
//   object ::= "{" ws pair ("," ws pair)* "}"
//   pair   ::= [a-z]+ ws ":" ws ( "\"" [^"\\]* "\"" | [0-9]{1,3} | . )
//   ws     ::= [ \t\n]*
//
// Literals "..." and classes [...] / [^...] with escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH
// \UHHHHHHHH; `.` is any code point; ( ) groups, `|` alternatives, postfix * + ? {m} {m,} {m,n}.
// Classes and `.` are over Unicode code points, matched as their UTF-8 bytes. A rule's body may
// continue on following lines: it ends where the next `name ::=` starts (llama.cpp requires the
// continuation inside parentheses or after `|`; both forms parse here).
#pragma once

#include <string_view>

#include "grammar/ast.h"

namespace moeserve::grammar {

// Throws GrammarError "GBNF line L column C: ..." on bad syntax, a rule defined twice, a
// reference to an undefined rule, or no `root` rule.
GrammarAst ParseGbnf(std::string_view text, std::string_view root_rule = "root");

}  // namespace moeserve::grammar
