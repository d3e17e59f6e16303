// Regex front end against PCRE2 itself: for each pattern, random strings over an alphabet made
// from the pattern's own characters (plus multi-byte ones) must be fully matched by the grammar
// exactly when PCRE2 fully matches them; unsupported constructs are errors naming them.
#include "grammar/regex.h"

#include <gtest/gtest.h>

#include "grammar/grammar.h"
#include "test_util.h"

namespace moeserve::grammar {
namespace {

struct RegexCase {
  std::string pattern;
  std::vector<std::string> pieces;
  std::vector<std::string> examples = {};  // full matches (random strings rarely hit long ones)
};

std::vector<RegexCase> Cases() {
  const std::vector<std::string> digits = {"0", "1", "5", "9"};
  auto with = [](std::vector<std::string> a, std::vector<std::string> b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  return {
      {"[a-z]+", {"a", "z", "A", "0", "é"}},
      {"\\d{3}-\\d{4}", with(digits, {"-", "a"}), {"123-4567"}},
      {"(?:ab|cd)*e?", {"ab", "cd", "a", "e", "c"}},
      {"^[A-Z][a-z]{1,5}$", {"A", "Z", "a", "q", "é"}},
      {"\\w+@\\w+\\.com", {"a", "_", "9", "@", ".", "com", "-"}, {"a_9@x.com"}},
      {"\\s*x\\s*", {" ", "\t", "\n", "\v", "x", "y"}},
      {"[^\\s,]+(,[^\\s,]+)*", {"a", ",", " ", "é", "\n", "😀"}},
      {".+", {"a", "\n", "é", "中"}},
      {"a.c", {"a", "c", "\n", "b", "😀"}},
      {"(\\d+)(\\.\\d+)?", with(digits, {".", "x"})},
      {"(?<year>\\d{4})-(?P<m>\\d{2})", with(digits, {"-"})},
      {"[\\x41-\\x43\\x{e9}]{2}", {"A", "B", "C", "D", "é", "e"}},
      {"x{2,}y{0,2}", {"x", "y"}},
      {"(a|b|)c", {"a", "b", "c"}},
      {"[\\]\\-\\\\]+", {"]", "-", "\\", "a"}},
      {"\\D\\W\\S", {"a", "1", " ", "_", "-", "é"}},
      {"(?:a+?b*?)+c??", {"a", "b", "c"}},
      {"[.]\\.\\*\\+\\?\\(\\)", {".", "*", "+", "?", "(", ")", "a"}, {"..*+?()"}},
      {"(true|false|null)", {"true", "false", "null", "t", "n"}},
      {"[α-ω]+\\d?", {"α", "ω", "β", "1", "a"}},
      {"(?:[01]\\d|2[0-3]):[0-5]\\d", with(digits, {":", "2", "3"})},
      {"[^a]", {"a", "b", "\n", "é"}},
      {"a{3}|b{1,2}", {"a", "b"}},
      {"[-a]b[c-]", {"-", "a", "b", "c"}},
  };
}

TEST(Regex, FullMatchesAgreeWithPcre2) {
  std::mt19937 rng(5);
  for (const RegexCase& c : Cases()) {
    SCOPED_TRACE(c.pattern);
    const auto g = Grammar::Compile(RegexToGrammar(c.pattern));
    const testing::Pcre re(c.pattern, 0);
    int positives = 0;
    for (const std::string& s : c.examples) {
      ASSERT_TRUE(re.FullMatch(s)) << s;
      ASSERT_TRUE(testing::GrammarAccepts(g, s)) << s;
      ++positives;
    }
    for (int i = 0; i < 2000; ++i) {
      const std::string s = testing::RandomString(rng, c.pieces, 7);
      const bool want = re.FullMatch(s);
      positives += want;
      ASSERT_EQ(testing::GrammarAccepts(g, s), want) << "'" << s << "'";
    }
    EXPECT_GT(positives, 0);
  }
}

TEST(Regex, UnsupportedConstructsAreNamed) {
  auto error = [](const std::string& p) -> std::string {
    try {
      RegexToGrammar(p);
    } catch (const GrammarError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error("a(?=b)").find("lookaround"), std::string::npos);
  EXPECT_NE(error("(a)\\1").find("backreferences"), std::string::npos);
  EXPECT_NE(error("\\bword").find("word boundaries"), std::string::npos);
  EXPECT_NE(error("\\p{L}").find("Unicode properties"), std::string::npos);
  EXPECT_NE(error("a++").find("possessive"), std::string::npos);
  EXPECT_NE(error("(?i)a").find("inline flags"), std::string::npos);
  EXPECT_NE(error("a^b").find("'^' is only supported at the start"), std::string::npos);
  EXPECT_NE(error("a$b").find("'$' is only supported at the end"), std::string::npos);
  EXPECT_NE(error("[[:alpha:]]").find("POSIX"), std::string::npos);
  EXPECT_NE(error("(ab").find("missing ')'"), std::string::npos);
  EXPECT_NE(error("ab)").find("unbalanced ')'"), std::string::npos);
  EXPECT_NE(error("*a").find("nothing to repeat"), std::string::npos);
  EXPECT_NE(error("[abc").find("unterminated"), std::string::npos);
  EXPECT_EQ(error("^abc$"), "");
}

TEST(Choice, OneOfTheStrings) {
  const auto g = Grammar::Compile(ChoiceToGrammar({"yes", "no", "maybe so", "é"}));
  for (const char* s : {"yes", "no", "maybe so", "é"}) EXPECT_TRUE(testing::GrammarAccepts(g, s));
  for (const char* s : {"", "ye", "yesno", "maybe", "e"})
    EXPECT_FALSE(testing::GrammarAccepts(g, s));
  EXPECT_THROW(ChoiceToGrammar({}), GrammarError);
}

}  // namespace
}  // namespace moeserve::grammar
