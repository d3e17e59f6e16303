// Masks from the per-state cache equal the brute force (every token tried on a copy of the
// parse) along random walks, on small random vocabularies with odd tokens: tokens spanning
// several grammar elements, UTF-8 characters split across tokens, empty and special tokens.
#include <gtest/gtest.h>

#include "grammar/matcher.h"
#include "test_util.h"

namespace moeserve::grammar {
namespace {

// A vocabulary of random concatenations of `pieces`, plus every single byte of the pieces (so
// split UTF-8 characters occur), an empty token, a special token and an EOS.
std::shared_ptr<Vocabulary> RandomVocabulary(std::mt19937& rng,
                                             const std::vector<std::string>& pieces, size_t n) {
  std::vector<std::string> tokens = {"", "<special>", "<eos>"};
  std::vector<bool> special = {false, true, true};
  for (const std::string& p : pieces)
    for (char c : p) tokens.push_back(std::string(1, c));
  while (tokens.size() < n) {
    std::string t = testing::RandomString(rng, pieces, 4);
    if (rng() % 5 == 0 && t.size() > 1) t.pop_back();  // cut a character in half sometimes
    tokens.push_back(t);
  }
  special.resize(tokens.size(), false);
  return std::make_shared<Vocabulary>(std::move(tokens), std::move(special),
                                      std::vector<int32_t>{2});
}

void CheckRandomWalks(const std::string& gbnf, const std::vector<std::string>& pieces,
                      uint32_t seed, int rounds = 4) {
  SCOPED_TRACE(gbnf);
  std::mt19937 rng(seed);
  int checked = 0;
  for (int round = 0; round < rounds; ++round) {
    auto vocab = RandomVocabulary(rng, pieces, 300);
    auto compiled = CompileForVocabulary(ParseGbnf(gbnf), vocab);
    GrammarMatcher m(compiled);
    TokenBitmask fast(BitmaskWords(vocab->size())), slow(fast.size());
    for (int step = 0; step < 60; ++step) {
      m.FillNextTokenMask(fast);
      m.FillNextTokenMaskBruteForce(slow);
      for (size_t id = 0; id < vocab->size(); ++id)
        ASSERT_EQ(BitmaskTest(fast, int32_t(id)), BitmaskTest(slow, int32_t(id)))
            << "round " << round << " step " << step << " token '" << vocab->bytes(int32_t(id))
            << "'";
      ++checked;
      std::vector<int32_t> allowed;  // EOS only when nothing else is allowed: longer walks
      for (size_t id = 0; id < vocab->size(); ++id)
        if (BitmaskTest(fast, int32_t(id)) && !vocab->is_stop(int32_t(id)))
          allowed.push_back(int32_t(id));
      if (allowed.empty() && BitmaskTest(fast, 2)) allowed.push_back(2);
      if (allowed.empty()) break;
      if (step % 13 == 12 && m.num_steps() >= 2) {
        m.Rollback(2);
        continue;
      }
      const int32_t pick = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.AcceptToken(pick));
      if (m.IsTerminated()) break;
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(TokenMask, EqualsBruteForceOnJsonLikeGrammar) {
  CheckRandomWalks(R"(root ::= obj
obj ::= "{" ws (pair (ws "," ws pair)*)? ws "}"
pair ::= str ws ":" ws value
value ::= str | num | obj | "[" ws (value (ws "," ws value)*)? ws "]" | "true" | "null"
str ::= "\"" ([^"\\] | "\\" ["\\n])* "\""
num ::= "-"? [0-9]+ ("." [0-9]+)?
ws ::= [ \n]{0,2})",
                   {"{", "}",  "[", "]", "\"", ":",    ",",    " ",   "\n",  "a",  "é",
                    "😀", "\\", "1", "-", ".",  "true", "null", "\":", "\",", "}\n"},
                   1);
}

TEST(TokenMask, EqualsBruteForceOnRecursiveAndUnicodeGrammars) {
  CheckRandomWalks(R"g(root ::= "" | root "(" root ")")g", {"(", ")", "()", "(("}, 2);
  CheckRandomWalks(R"(root ::= [α-ω]{1,3} ("-" [^a-z]{2})* "!")",
                   {"α", "ω", "β", "-", "é", "中", "😀", "!", "a"}, 3, 30);
  CheckRandomWalks(R"(root ::= ("ab" | "a" | "b")* "c" ("x"{3})?)", {"a", "b", "c", "x"}, 4, 30);
}

TEST(TokenMask, StopTokensOnlyWhenTheGrammarCanEnd) {
  auto vocab = std::make_shared<Vocabulary>(
      std::vector<std::string>{"a", "b", "<eos>", "<im_end>", "<tool>"},
      std::vector<bool>{false, false, true, true, true}, std::vector<int32_t>{2, 3});
  GrammarMatcher m(CompileForVocabulary(ParseGbnf(R"(root ::= "a"+)"), vocab));
  TokenBitmask mask(BitmaskWords(vocab->size()));
  m.FillNextTokenMask(mask);
  EXPECT_EQ(mask[0], 0b00001u);
  ASSERT_TRUE(m.AcceptToken(0));
  m.FillNextTokenMask(mask);
  EXPECT_EQ(mask[0], 0b01101u);
  ASSERT_TRUE(m.AcceptToken(3));
  m.FillNextTokenMask(mask);
  EXPECT_EQ(mask[0], 0u);
}

TEST(TokenMask, ByteLevelTokensDecodeToTheirBytes) {
  EXPECT_EQ(ByteLevelTokenBytes("\xC4\xA0hello"), " hello");       // "Ġhello"
  EXPECT_EQ(ByteLevelTokenBytes("\xC4\x8A"), "\n");                // "Ċ"
  EXPECT_EQ(ByteLevelTokenBytes("\xC3\x83\xC2\xA9"), "\xC3\xA9");  // "Ã©": the two bytes of é
  EXPECT_EQ(ByteLevelTokenBytes("{\""), "{\"");
  EXPECT_EQ(ByteLevelTokenBytes("\xC4\x80"), std::string(1, '\0'));  // U+0100 is byte 0
}

}  // namespace
}  // namespace moeserve::grammar
