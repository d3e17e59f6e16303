// GBNF text -> AST: the forms llama.cpp users write, and errors that point at line and column.
#include "grammar/gbnf_parser.h"

#include <gtest/gtest.h>

namespace moeserve::grammar {
namespace {

std::string ErrorOf(std::string_view text) {
  try {
    ParseGbnf(text);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "";
}

TEST(GbnfParser, ParsesRulesGroupsClassesAndRepetitions) {
  const GrammarAst ast = ParseGbnf(R"(
# a comment line
root ::= "{" ws pair ("," ws pair)* "}"   # trailing comment
pair ::= [a-z_]+ ws ":" ws (num | str | .)
num  ::= "-"? [0-9]{1,3} ("." [0-9]{2,})?
str  ::= "\"" [^"\\\n]* "\""
ws   ::= [ \t\n]{0,4}
)");
  ASSERT_EQ(ast.rules.size(), 5u);
  EXPECT_EQ(ast.rules[ast.root].name, "root");
  const std::string text = ToGbnf(ast);
  EXPECT_NE(text.find("[0-9]{1,3}"), std::string::npos) << text;
  EXPECT_NE(text.find("[0-9]{2,}"), std::string::npos) << text;
  EXPECT_NE(text.find("[^\\\"\\\\\\n]*"), std::string::npos) << text;
  // The printed form parses back to the same text.
  EXPECT_EQ(ToGbnf(ParseGbnf(text)), text);
}

TEST(GbnfParser, RuleBodiesContinueOnFollowingLines) {
  const GrammarAst ast = ParseGbnf(
      "root ::= \"a\"\n"
      "  | \"b\"\n"
      "  \"c\"\n"
      "other ::= (\n"
      "  \"x\"\n"
      "  | \"y\" )\n");
  ASSERT_EQ(ast.rules.size(), 2u);
  EXPECT_EQ(ToGbnf(ast), "root ::= \"a\" | (\"b\" \"c\")\nother ::= \"x\" | \"y\"\n");
}

TEST(GbnfParser, EscapesAndUnicode) {
  const GrammarAst ast = ParseGbnf(R"(root ::= "\x41\u00e9\U0001F600\n\t\\" [α-ω\-])");
  const Expr& body = ast.rules[0].body;
  ASSERT_EQ(body.kind, Expr::Kind::kSeq);
  EXPECT_EQ(body.children[0].text, "A\xC3\xA9\xF0\x9F\x98\x80\n\t\\");
  ASSERT_EQ(body.children[1].ranges.size(), 2u);
  EXPECT_EQ(body.children[1].ranges[0].lo, 0x3B1u);
  EXPECT_EQ(body.children[1].ranges[0].hi, 0x3C9u);
  EXPECT_EQ(body.children[1].ranges[1].lo, uint32_t('-'));
}

TEST(GbnfParser, ErrorsNameLineAndColumn) {
  EXPECT_EQ(ErrorOf("root \"a\""), "GBNF line 1 column 6: expected '::=' after rule name 'root'");
  // A line that does not start `name ::=` continues the rule above.
  EXPECT_EQ(ErrorOf("root ::= \"a\"\nfoo \"b\"\n"), "GBNF line 2 column 1: undefined rule 'foo'");
  EXPECT_EQ(ErrorOf("root ::= a\n"), "GBNF line 1 column 10: undefined rule 'a'");
  EXPECT_EQ(ErrorOf("root ::= \"abc\n"), "GBNF line 1 column 10: unterminated string literal");
  EXPECT_EQ(ErrorOf("root ::= [a-\n"), "GBNF line 1 column 10: unterminated character class");
  EXPECT_EQ(ErrorOf("root ::= \"\\q\""), "GBNF line 1 column 11: unknown escape '\\q'");
  EXPECT_EQ(ErrorOf("root ::= \"a\"{3,1}"),
            "GBNF line 1 column 13: repetition {3,1} has max < min");
  EXPECT_EQ(ErrorOf("root ::= (\"a\""),
            "GBNF line 1 column 14: expected ')' to close the group opened at offset 9");
  EXPECT_EQ(ErrorOf("root ::= \"a\"\nroot ::= \"b\""),
            "GBNF line 2 column 1: rule 'root' is defined twice");
  EXPECT_EQ(ErrorOf("start ::= \"a\""), "GBNF: no 'root' rule");
  EXPECT_EQ(ErrorOf("root ::= \"a\" )"),
            "GBNF line 1 column 14: unexpected ')' (expected a newline or the end)");
  EXPECT_EQ(ErrorOf("root ::= [z-a]"), "GBNF line 1 column 10: character range out of order");
  EXPECT_EQ(ErrorOf("root ::= x{99999}\nx ::= \"a\""),
            "GBNF line 1 column 12: repetition count above 10000");
}

}  // namespace
}  // namespace moeserve::grammar
