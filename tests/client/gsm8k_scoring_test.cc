#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "client/gsm8k.h"
#include "core/check.h"
#include "test_util.h"

namespace moeserve::client::gsm8k {
namespace {

struct Case {
  std::string text, strict, flex;
};

// Expected values from Python's re with lm-eval's patterns (tests/client/reference.py).
TEST(Gsm8kFilters, CannedResponses) {
  const std::vector<Case> cases = {
      {"The answer is $1,234.", "[invalid]", "$1,234."},
      {"#### -5", "-5", "-5"},
      {"so 3 + 4 = 7 and then 12 apples.\n#### 12", "12", "12"},
      {"no number here", "[invalid]", "[invalid]"},
      {"-", "[invalid]", "[invalid]"},
      {"a-5b", "[invalid]", "-5"},
      {"x -.5 y", "[invalid]", "-.5"},
      {"#### -", "[invalid]", "[invalid]"},
      {"#### - 5", "[invalid]", "5"},
      {"price $5 and 6.", "[invalid]", "6."},
      {"1,2,3", "[invalid]", "1,2,3"},
      {"####5", "[invalid]", "5"},
      {"#### 1,000.50.", "1,000.50.", "1,000.50."},
      {"-12-", "[invalid]", "-12"},
      {"5 - 3", "[invalid]", "3"},
      {"#### 7 then #### 8", "7", "8"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(StrictMatch(c.text), c.strict) << c.text;
    EXPECT_EQ(FlexibleExtract(c.text), c.flex) << c.text;
  }
}

TEST(Gsm8kFilters, ExactMatchPreprocessing) {
  EXPECT_EQ(NormalizeForExactMatch("$1,234."), "1234");
  EXPECT_EQ(NormalizeForExactMatch("x\n#### 1,234"), "1234");
  EXPECT_EQ(NormalizeForExactMatch("5.\n"), "5\n");           // Python's `$` before a final newline
  EXPECT_EQ(NormalizeForExactMatch("A.."), "a.");             // one trailing dot only
  EXPECT_EQ(NormalizeForExactMatch("#### 3\n#### 4."), "4");  // through the last "#### "
  EXPECT_EQ(NormalizeForExactMatch("[invalid]"), "[invalid]");
  const std::string target = "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs.\n#### 18";
  EXPECT_TRUE(ExactMatch("18", target));
  EXPECT_TRUE(ExactMatch("$18.", target));
  EXPECT_FALSE(ExactMatch("18.0", target));
  EXPECT_FALSE(ExactMatch("[invalid]", target));
  EXPECT_TRUE(ExactMatch("1,234", "#### 1234"));
  EXPECT_TRUE(ExactMatch("-5", "#### -5"));
}

TEST(Gsm8kVllm, LastNumber) {
  EXPECT_EQ(VllmAnswer("The answer is $1,234."), "1234");
  EXPECT_EQ(VllmAnswer("#### -5"), "5");  // \d+ has no sign
  EXPECT_EQ(VllmAnswer("3 apples and 4 pears, 7 total"), "7");
  EXPECT_EQ(VllmAnswer("no number"), std::nullopt);
  EXPECT_EQ(VllmAnswer("it is 007"), std::nullopt);  // ast.literal_eval rejects it
  EXPECT_EQ(VllmAnswer("it is 000"), "0");
  EXPECT_EQ(VllmAnswer("12.50"), "50");
  EXPECT_EQ(VllmAnswer("123456789012345678901234567890"), "123456789012345678901234567890");
}

TEST(Gsm8kPrompts, LmEvalAndVllmShapes) {
  const std::vector<Problem> train = {
      {"A?", "a1\n#### 1"}, {"B?", "b\n#### 2"}, {"C?", "c #### 3"}};
  const Problem q{"Q?", "#### 9"};
  EXPECT_EQ(LmEvalPrompt(train, {2, 0}, q),
            "Question: C?\nAnswer: c #### 3\n\nQuestion: A?\nAnswer: a1\n#### 1\n\n"
            "Question: Q?\nAnswer:");
  EXPECT_EQ(LmEvalPrompt(train, {}, q), "Question: Q?\nAnswer:");
  EXPECT_EQ(VllmPrompt(train, 2, q),
            "Question: A?\nAnswer: a1\n#### 1\n\nQuestion: B?\nAnswer: b\n#### 2\n\n"
            "Question: Q?\nAnswer:");
  EXPECT_THROW(VllmPrompt(train, 4, q), Error);
}

TEST(Gsm8kAggregate, MeanAndStderrAsLmEval) {
  // statistics.stdev([1,1,0,1,0,1]) / sqrt(6)
  const MeanStderr m = MeanWithStderr({1, 1, 0, 1, 0, 1});
  EXPECT_DOUBLE_EQ(m.mean, 4.0 / 6.0);
  EXPECT_NEAR(m.std_error, 0.21081851067789195, 1e-15);
  EXPECT_TRUE(std::isnan(MeanWithStderr({1}).std_error));
  EXPECT_DOUBLE_EQ(MeanWithStderr({1, 1, 1}).std_error, 0.0);
}

// Random strings over the characters the patterns care about, scored here and by Python's re.
TEST(Gsm8kFilters, MatchPythonOnRandomText) {
  const std::string alphabet = "0123456789$.,- #\nabA";
  std::mt19937 rng(7);
  nlohmann::json texts = nlohmann::json::array();
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    const size_t len = rng() % 24;
    for (size_t j = 0; j < len; ++j) {
      // "#### " often enough for strict-match to fire
      if (rng() % 12 == 0)
        s += "#### ";
      else
        s += alphabet[rng() % alphabet.size()];
    }
    texts.push_back(s);
  }
  auto ref = testing::PythonReference("gsm8k", texts);
  if (!ref) GTEST_SKIP() << "no /usr/bin/python3";
  ASSERT_EQ(ref->size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string t = texts[i];
    const auto& r = (*ref)[i];
    ASSERT_EQ(StrictMatch(t), r["strict"].get<std::string>()) << nlohmann::json(t).dump();
    ASSERT_EQ(FlexibleExtract(t), r["flex"].get<std::string>()) << nlohmann::json(t).dump();
    ASSERT_EQ(NormalizeForExactMatch(StrictMatch(t)), r["strict_norm"].get<std::string>());
    ASSERT_EQ(NormalizeForExactMatch(FlexibleExtract(t)), r["flex_norm"].get<std::string>());
    ASSERT_EQ(NormalizeForExactMatch(t), r["text_norm"].get<std::string>())
        << nlohmann::json(t).dump();
    const auto v = VllmAnswer(t);
    if (r["vllm"].is_null())
      ASSERT_FALSE(v.has_value()) << nlohmann::json(t).dump();
    else
      ASSERT_EQ(v, r["vllm"].get<std::string>()) << nlohmann::json(t).dump();
  }
}

// The real data, when present: every test answer scores as its own prediction.
TEST(Gsm8kData, RealTestAnswersMatchThemselves) {
  const std::string path = MOESERVE_SOURCE_DIR "/data/gsm8k/test.jsonl";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  const auto test = LoadJsonl(path);
  EXPECT_EQ(test.size(), 1319u);
  for (const Problem& p : test) {
    ASSERT_TRUE(ExactMatch(StrictMatch(p.answer), p.answer)) << p.answer;
    ASSERT_TRUE(VllmAnswer(p.answer).has_value()) << p.answer;
  }
}

}  // namespace
}  // namespace moeserve::client::gsm8k
