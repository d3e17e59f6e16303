// The Earley matcher accepts exactly what a reference accepts: PCRE2 for regular grammars (random
// strings over each grammar's alphabet plus hand-picked ones), a direct checker for balanced
// parentheses; left recursion, ambiguity and long inputs stay bounded; rollback restores state.
#include "grammar/matcher.h"

#include <gtest/gtest.h>

#include "grammar/grammar.h"
#include "test_util.h"

namespace moeserve::grammar {
namespace {

using testing::GrammarAccepts;
using testing::Pcre;
using testing::RandomString;

std::shared_ptr<const Grammar> Compile(const std::string& gbnf) {
  return Grammar::Compile(ParseGbnf(gbnf));
}

struct RegularCase {
  std::string gbnf;
  std::string pcre;
  std::vector<std::string> pieces;  // alphabet for random strings
  std::vector<std::string> must_accept;
};

std::vector<RegularCase> RegularCases() {
  return {
      {R"(root ::= "a" "b"* "c"?)", "ab*c?", {"a", "b", "c", "d"}, {"a", "abbbc"}},
      {R"(root ::= ("ab" | "a")* "b")", "(?:ab|a)*b", {"a", "b"}, {"b", "abab", "aab"}},
      {R"(root ::= [0-9]{2,4} ("." [0-9]{1,})?)",
       "[0-9]{2,4}(?:\\.[0-9]{1,})?",
       {"1", "9", ".", "x"},
       {"12", "1234.5"}},
      {R"(root ::= [a-c]{3})", "[a-c]{3}", {"a", "b", "c", "d"}, {"abc"}},
      {R"(root ::= [^a-z"]+)", "[^a-z\"]+", {"a", "Z", "\"", "é", "中", "😀", "\n"}, {"é中😀"}},
      {R"(root ::= [α-ω]+ "!")", "[α-ω]+!", {"α", "ω", "β", "a", "!", "Ω", "ϊ"}, {"αβω!"}},
      {R"(root ::= . "x" .)", ".x.", {"x", "é", "😀", "\n", "ab"}, {"éx😀"}},
      {R"(root ::= ("-"? [1-9] [0-9]{0,2} | "0") ws
ws ::= [ \t]*)",
       "(?:-?[1-9][0-9]{0,2}|0)[ \\t]*",
       {"-", "0", "1", "9", " ", "\t"},
       {"-120 ", "0"}},
      {R"(root ::= "\"" ( [^"\\] | "\\" ["\\/bfnrt] )* "\"")",
       "\"(?:[^\"\\\\]|\\\\[\"\\\\/bfnrt])*\"",
       {"\"", "\\", "n", "q", "é", "/"},
       {"\"\"", "\"a\\n\\\"é\""}},
      {R"(root ::= x{2,3} y?
x ::= "ab" | "a"
y ::= "b"+)",
       "(?:ab|a){2,3}b*",
       {"a", "b"},
       {"aa", "abab", "ababab", "aab"}},
      {R"(root ::= "" | "a" root)", "a*", {"a", "b"}, {"", "aaaa"}},
      {R"(root ::= "[" (item ("," item)*)? "]"
item ::= [0-9]+ | "true" | "null")",
       "\\[(?:(?:[0-9]+|true|null)(?:,(?:[0-9]+|true|null))*)?\\]",
       {"[", "]", ",", "1", "true", "null", "tr"},
       {"[]", "[1,true,null]"}},
  };
}

TEST(Matcher, AgreesWithPcre2OnRegularGrammars) {
  std::mt19937 rng(7);
  for (const RegularCase& c : RegularCases()) {
    SCOPED_TRACE(c.gbnf);
    const auto g = Compile(c.gbnf);
    const Pcre re(c.pcre);
    for (const std::string& s : c.must_accept) {
      EXPECT_TRUE(re.FullMatch(s)) << s;
      EXPECT_TRUE(GrammarAccepts(g, s)) << s;
    }
    int positives = 0;
    for (int i = 0; i < 3000; ++i) {
      const std::string s = RandomString(rng, c.pieces, 8);
      const bool want = re.FullMatch(s);
      positives += want;
      ASSERT_EQ(GrammarAccepts(g, s), want) << "'" << s << "'";
    }
    EXPECT_GT(positives, 0);
  }
}

bool Balanced(const std::string& s) {
  int depth = 0;
  for (char c : s) {
    depth += c == '(' ? 1 : -1;
    if (depth < 0) return false;
  }
  return depth == 0;
}

TEST(Matcher, RecursionLeftAndRight) {
  const auto right = Compile(R"g(root ::= "" | "(" root ")" root)g");
  const auto left = Compile(R"g(root ::= "" | root "(" root ")")g");
  std::mt19937 rng(3);
  for (int i = 0; i < 3000; ++i) {
    const std::string s = RandomString(rng, {"(", ")"}, 12);
    ASSERT_EQ(GrammarAccepts(right, s), Balanced(s)) << s;
    ASSERT_EQ(GrammarAccepts(left, s), Balanced(s)) << s;
  }
  const auto expr = Compile(R"g(root ::= root "+" term | term
term ::= term "*" atom | atom
atom ::= [0-9]+ | "(" root ")")g");
  const Pcre flat("[0-9]+(?:[+*][0-9]+)*");
  for (int i = 0; i < 3000; ++i) {
    const std::string s = RandomString(rng, {"1", "2", "+", "*"}, 10);
    ASSERT_EQ(GrammarAccepts(expr, s), flat.FullMatch(s)) << s;
  }
  EXPECT_TRUE(GrammarAccepts(expr, "(1+2)*3+(4*(5))"));
  EXPECT_FALSE(GrammarAccepts(expr, "(1+2"));
}

TEST(Matcher, AmbiguousGrammarsStayBounded) {
  // Exponentially many parses of a^n; each Earley set stays small.
  const auto g = Compile(R"(root ::= x*
x ::= "a" | "a" | y | y y
y ::= "a" | "")");
  EarleyParser p(g);
  for (int i = 0; i < 5000; ++i) ASSERT_TRUE(p.Advance('a'));
  EXPECT_TRUE(p.CanFinish());
  EXPECT_LT(p.last_set().size(), 64u);
  // Right recursion over a long input still finishes.
  const auto r = Compile(R"(root ::= "a" root | "b")");
  EXPECT_TRUE(GrammarAccepts(r, std::string(3000, 'a') + "b"));
}

TEST(Matcher, RejectsGrammarsThatCanNeverFinish) {
  EXPECT_THROW(Compile(R"(root ::= "a" root)"), GrammarError);
  // A dead alternative is pruned, the rest still matches.
  const auto g = Compile(R"(root ::= "x" | loop
loop ::= "a" loop)");
  EarleyParser p(g);
  EXPECT_FALSE(p.Advance('a'));
  EXPECT_TRUE(GrammarAccepts(g, "x"));
}

TEST(Matcher, Utf8SequencesCoverExactlyTheRange) {
  std::mt19937 rng(11);
  const uint32_t bounds[] = {0,      0x7F,   0x80,   0x7FF,   0x800,
                             0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF};
  for (int t = 0; t < 200; ++t) {
    uint32_t lo = std::uniform_int_distribution<uint32_t>(0, 0x10FFFF)(rng);
    uint32_t hi = std::uniform_int_distribution<uint32_t>(0, 0x10FFFF)(rng);
    if (t < 50) lo = bounds[t % 10], hi = bounds[(t / 5) % 10];
    if (lo > hi) std::swap(lo, hi);
    const auto seqs = Utf8RangeSequences(lo, hi);
    for (int k = 0; k < 200; ++k) {
      uint32_t cp = std::uniform_int_distribution<uint32_t>(0, 0x10FFFF)(rng);
      if (k % 4 == 0) cp = std::min<uint32_t>(0x10FFFF, lo + k / 4);
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      std::string enc;
      AppendUtf8(cp, enc);
      bool matched = false;
      for (const auto& seq : seqs) {
        if (seq.size() != enc.size()) continue;
        bool all = true;
        for (size_t i = 0; i < seq.size(); ++i) {
          const auto b = static_cast<uint8_t>(enc[i]);
          all = all && b >= seq[i].first && b <= seq[i].second;
        }
        matched = matched || all;
      }
      ASSERT_EQ(matched, cp >= lo && cp <= hi) << std::hex << lo << " " << hi << " " << cp;
    }
  }
}

TEST(Matcher, BytesRollbackAndTermination) {
  auto vocab = std::make_shared<Vocabulary>(
      std::vector<std::string>{"a", "b", "ab", "", "<eos>", "<x>"},
      std::vector<bool>{false, false, false, false, true, true}, std::vector<int32_t>{4});
  auto compiled = CompileForVocabulary(ParseGbnf(R"(root ::= "a" "b"{0,2})"), vocab);
  GrammarMatcher m(compiled);
  EXPECT_FALSE(m.AcceptToken(4));  // EOS before the grammar can end
  EXPECT_FALSE(m.AcceptToken(1));
  EXPECT_FALSE(m.AcceptToken(3));  // empty tokens are never allowed
  EXPECT_FALSE(m.AcceptToken(5));  // nor other special tokens
  EXPECT_TRUE(m.AcceptToken(2));   // "ab"
  EXPECT_TRUE(m.CanTerminate());
  EXPECT_FALSE(m.MustTerminate());
  EXPECT_TRUE(m.AcceptToken(1));
  EXPECT_TRUE(m.MustTerminate());
  EXPECT_FALSE(m.AcceptToken(1));
  m.Rollback(1);
  EXPECT_FALSE(m.MustTerminate());
  EXPECT_TRUE(m.AcceptToken(1));
  EXPECT_TRUE(m.AcceptToken(4));
  EXPECT_TRUE(m.IsTerminated());
  EXPECT_FALSE(m.AcceptToken(4));
  m.Rollback(3);
  EXPECT_EQ(m.num_steps(), 0u);
  EXPECT_FALSE(m.CanTerminate());
  EXPECT_TRUE(m.AcceptBytes("abb"));
  EXPECT_FALSE(m.AcceptBytes("b"));
  EXPECT_TRUE(m.MustTerminate());
}

}  // namespace
}  // namespace moeserve::grammar
