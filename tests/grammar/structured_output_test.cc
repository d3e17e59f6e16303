// Every request kind builds its grammar; the cache compiles once per distinct request, evicts the
// least recently used, and lets errors through.
#include "grammar/structured_output.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace moeserve::grammar {
namespace {

std::shared_ptr<const Vocabulary> SmallVocabulary() {
  return std::make_shared<Vocabulary>(std::vector<std::string>{"a", "b", "{", "}", "<eos>"},
                                      std::vector<bool>{false, false, false, false, true},
                                      std::vector<int32_t>{4});
}

TEST(StructuredOutput, EveryKindBuilds) {
  auto accepts = [](const GrammarRequest& r, const std::string& s) {
    return testing::GrammarAccepts(Grammar::Compile(BuildGrammar(r)), s);
  };
  EXPECT_TRUE(accepts({GrammarKind::kJsonSchema, R"({"type":"integer"})"}, "-12"));
  EXPECT_TRUE(accepts({GrammarKind::kJsonObject}, "{}"));
  EXPECT_TRUE(accepts({GrammarKind::kRegex, "a+b"}, "aab"));
  EXPECT_TRUE(accepts({GrammarKind::kChoice, "", {"x", "yz"}}, "yz"));
  EXPECT_TRUE(accepts({GrammarKind::kGbnf, "root ::= \"q\"+"}, "qq"));
  EXPECT_FALSE(accepts({GrammarKind::kJsonObject, "", {}, true}, "{ }"));
}

TEST(StructuredOutput, CacheCompilesOncePerRequestAndEvictsTheOldest) {
  GrammarCache cache(SmallVocabulary(), 2);
  const GrammarRequest a{GrammarKind::kRegex, "a+"}, b{GrammarKind::kRegex, "b+"},
      c{GrammarKind::kChoice, "", {"a+"}};
  const auto first = cache.Get(a);
  EXPECT_EQ(cache.Get(a), first);
  EXPECT_NE(cache.Get(c), first);  // same text, other kind: another grammar
  cache.Get(a);                    // a is now the most recent; c the oldest
  cache.Get(b);                    // evicts c
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.Get(a), first);
  EXPECT_THROW(cache.Get({GrammarKind::kRegex, "(a"}), GrammarError);
  EXPECT_THROW(cache.Get({GrammarKind::kJsonSchema, R"({"not":{}})"}), GrammarError);
}

}  // namespace
}  // namespace moeserve::grammar
