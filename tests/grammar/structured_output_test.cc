// Every request kind builds its grammar; the cache compiles once per distinct request, evicts the
// least recently used, and lets errors through.
#include "grammar/structured_output.h"

#include <gtest/gtest.h>

#include <thread>

#include "grammar/matcher.h"
#include "grammar/regex.h"
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

// The key-and-builder form (what the server uses for its own spec kinds): build() runs on a miss
// only, its errors are not cached, stats count hits and misses, and concurrent callers agree.
TEST(StructuredOutput, CacheByKeyBuildsOnMissesOnlyAndIsThreadSafe) {
  GrammarCache cache(SmallVocabulary(), 3);
  int builds = 0;
  auto regex = [&](const char* pattern) {
    return [&builds, pattern] {
      ++builds;
      return RegexToGrammar(pattern);
    };
  };
  const auto a = cache.Get("a", regex("a+"));
  EXPECT_EQ(cache.Get("a", regex("never built")), a);
  EXPECT_EQ(builds, 1);
  EXPECT_THROW(cache.Get("bad", regex("(a")), GrammarError);
  EXPECT_THROW(cache.Get("bad", regex("(a")), GrammarError);  // errors are not cached
  EXPECT_EQ(builds, 3);
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().misses, 3u);
  EXPECT_EQ(cache.stats().size, 1u);

  std::vector<std::thread> threads;
  std::vector<std::vector<std::shared_ptr<const CompiledGrammar>>> seen(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const std::string key = "k" + std::to_string(i % 2);
        seen[t].push_back(
            cache.Get(key, [key] { return RegexToGrammar(key == "k0" ? "b+" : "ab"); }));
      }
    });
  for (auto& th : threads) th.join();
  const auto k0 = cache.Get("k0", regex("unused")), k1 = cache.Get("k1", regex("unused"));
  EXPECT_EQ(builds, 3);
  // Every caller got the cached grammar, even those that raced on the first miss (the first
  // to finish is kept and returned to the others).
  for (const auto& v : seen)
    for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], i % 2 ? k1 : k0);
  EXPECT_LE(cache.stats().size, cache.capacity());
}

// Grammars of one cache share token classes of equal automaton regions: masks must still equal
// the brute force for each of them.
TEST(StructuredOutput, SharedTokenClassesKeepMasksExact) {
  std::vector<std::string> tokens = {"<eos>", "\"",   "\",", "\"}", "\"]", "{\"a\":", "[",
                                     "]",     "{",    "}",   ",",   ":",   "\\",      "n",
                                     "é",     "\xC3", "a",   "b c", "1",   "-"};
  std::vector<bool> special(tokens.size(), false);
  special[0] = true;
  auto vocab = std::make_shared<Vocabulary>(tokens, special, std::vector<int32_t>{0});
  GrammarCache cache(vocab);
  const std::vector<GrammarRequest> requests = {
      {GrammarKind::kJsonSchema,
       R"({"type":"object","properties":{"a":{"type":"string"}}})",
       {},
       true},
      {GrammarKind::kJsonSchema, R"({"type":"array","items":{"type":"string"}})", {}, true},
      {GrammarKind::kJsonSchema,
       R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"string"}}}})",
       {},
       true}};
  std::mt19937 rng(4);
  for (int round = 0; round < 3; ++round) {
    for (const GrammarRequest& r : requests) {
      GrammarMatcher m(cache.Get(r));
      TokenBitmask fast(BitmaskWords(vocab->size())), slow(fast.size());
      for (int step = 0; step < 40 && !m.IsTerminated(); ++step) {
        m.FillNextTokenMask(fast);
        m.FillNextTokenMaskBruteForce(slow);
        ASSERT_EQ(fast, slow) << r.text << " step " << step;
        std::vector<int32_t> allowed;
        for (size_t id = 0; id < vocab->size(); ++id)
          if (BitmaskTest(fast, int32_t(id))) allowed.push_back(int32_t(id));
        if (allowed.empty()) break;
        ASSERT_TRUE(m.AcceptToken(allowed[rng() % allowed.size()]));
      }
    }
  }
}

}  // namespace
}  // namespace moeserve::grammar
