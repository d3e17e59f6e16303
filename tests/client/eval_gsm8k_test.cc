// End to end: RunGsm8kEval against the fake server, with canned answers chosen by question.
#include <gtest/gtest.h>

#include <map>

#include "client/gsm8k.h"
#include "client/gsm8k_eval.h"
#include "core/check.h"
#include "fake_openai_server.h"
#include "test_util.h"

namespace moeserve::client {
namespace {

struct Doc {
  std::string question, answer, response;
};

// Expected scores (lm-eval strict / flexible, vLLM) are in the comments.
const std::vector<Doc> kDocs = {
    // 1 1 1: both filters find 18
    {"How many dollars does Janet make?", "16 - 3 - 4 = 9\n#### 18",
     "She sells 16 - 3 - 4 = 9 eggs, 9 * 2 = $18.\n#### 18"},
    // 1 1 1: the server cuts the text at the "Question:" stop, so the 99 never counts
    {"How many bolts?", "2 + 1 = 3\n#### 3",
     "It takes 2 + 1 = 3 bolts.\n#### 3\n\nQuestion: what is 99?\nAnswer: 99"},
    // 0 1 1: no "####"; flexible takes "$70,000." which normalizes to 70000
    {"How much profit?", "#### 70000", "The profit is $70,000."},
    // 1 0 0: strict takes the first "#### 540", the last number is 541
    {"How many meters?", "#### 540", "#### 540 sprints, or rather 541"},
    // 0 1 1
    {"How many cups?", "#### 20", "The answer is 20"},
    // 1 1 1: "1,234." -> "1234"
    {"How many marbles?", "#### 1234", "#### 1,234."},
    // 0 0 0, and invalid for vLLM
    {"How many cats?", "#### 7", "no idea"},
};

// r = random.Random(1234); [r.sample(range(12), 5) for _ in range(7)]
const std::vector<std::vector<size_t>> kShots = {
    {7, 1, 0, 10, 9}, {10, 1, 11, 5, 3}, {0, 11, 10, 5, 7}, {9, 7, 2, 1, 11},
    {11, 1, 0, 8, 7}, {3, 1, 8, 7, 10},  {9, 10, 1, 8, 0}};

class EvalGsm8k : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string train_text, test_text;
    for (int i = 0; i < 12; ++i) {
      train.push_back({"Train question " + std::to_string(i) + "?",
                       "Think " + std::to_string(i) + ".\n#### " + std::to_string(i)});
      train_text +=
          nlohmann::json{{"question", train.back().question}, {"answer", train.back().answer}}
              .dump() +
          "\n";
    }
    for (const Doc& d : kDocs) {
      test.push_back({d.question, d.answer});
      test_text += nlohmann::json{{"question", d.question}, {"answer", d.answer}}.dump() + "\n";
      responses[d.question] = d.response;
    }
    testing::WriteFile(dir.File("train.jsonl"), train_text);
    testing::WriteFile(dir.File("test.jsonl"), test_text);
    options.base_url = server.base_url() + "/completions";  // lm-eval's form
    options.data_path = dir.File("test.jsonl");
    options.fewshot_data_path = dir.File("train.jsonl");
    options.concurrency = 3;
    options.progress = false;
  }

  // The question the prompt ends with.
  static std::string LastQuestion(const std::string& prompt) {
    const size_t q = prompt.rfind("Question: ") + 10;
    return prompt.substr(q, prompt.rfind("\nAnswer:") - q);
  }

  size_t DocOf(const std::string& prompt) {
    const std::string q = LastQuestion(prompt);
    for (size_t i = 0; i < test.size(); ++i)
      if (test[i].question == q) return i;
    ADD_FAILURE() << "unknown question " << q;
    return 0;
  }

  std::map<std::string, std::string> responses;
  testing::FakeOpenAIServer server{[this](const nlohmann::json& req) {
    return responses.at(LastQuestion(req.at("prompt").get<std::string>()));
  }};
  testing::TempDir dir;
  std::vector<gsm8k::Problem> train, test;
  Gsm8kEvalOptions options;
};

TEST_F(EvalGsm8k, LmEvalScoresPromptsAndReport) {
  server.FailNext(2);  // two 503s on the way: retried, not scored
  const Gsm8kResult r = RunGsm8kEval(options);
  EXPECT_EQ(r.num_samples, 7u);
  EXPECT_EQ(r.failed_requests, 0u);
  ASSERT_EQ(r.metrics.size(), 2u);
  // statistics.mean / statistics.stdev(v) / sqrt(7) of the per-question scores above
  EXPECT_EQ(r.metrics[0].filter, "flexible-extract");
  EXPECT_DOUBLE_EQ(r.metrics[0].value, 0.7142857142857143);
  EXPECT_NEAR(r.metrics[0].std_error, 0.18442777839082938, 1e-15);
  EXPECT_EQ(r.metrics[1].filter, "strict-match");
  EXPECT_DOUBLE_EQ(r.metrics[1].value, 0.5714285714285714);
  EXPECT_NEAR(r.metrics[1].std_error, 0.20203050891044214, 1e-15);

  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 9u);
  std::vector<int> seen(test.size(), 0);
  for (const auto& req : requests) {
    const std::string prompt = req.at("prompt");
    const size_t doc = DocOf(prompt);
    ++seen[doc];
    // The shots lm-eval would choose with seed 1234, in lm-eval's layout.
    EXPECT_EQ(prompt, gsm8k::LmEvalPrompt(train, kShots[doc], test[doc]));
    EXPECT_TRUE(prompt.starts_with("Question: Train question " + std::to_string(kShots[doc][0]) +
                                   "?\nAnswer: Think "))
        << prompt;
    EXPECT_EQ(req.at("model"), "fake-model");  // asked from /v1/models
    EXPECT_EQ(req.at("temperature"), 0);
    EXPECT_EQ(req.at("max_tokens"), 256);
    EXPECT_EQ(req.at("seed"), 1234);
    EXPECT_EQ(req.at("stop"), (nlohmann::json{"Question:", "</s>", "<|im_end|>"}));
  }
  for (int n : seen) EXPECT_GE(n, 1);

  const auto& res = r.report["results"]["gsm8k"];
  EXPECT_DOUBLE_EQ(res["exact_match,strict-match"].get<double>(), 0.5714285714285714);
  EXPECT_DOUBLE_EQ(res["exact_match,flexible-extract"].get<double>(), 0.7142857142857143);
  const auto& samples = r.report["samples"];
  ASSERT_EQ(samples.size(), 7u);
  EXPECT_EQ(samples[3]["strict-match"]["extracted"], "540");
  EXPECT_EQ(samples[3]["flexible-extract"]["extracted"], "541");
  EXPECT_EQ(samples[3]["flexible-extract"]["exact_match"], 0);
  EXPECT_EQ(samples[1]["response"], "It takes 2 + 1 = 3 bolts.\n#### 3\n\n");
  EXPECT_EQ(samples[2]["target"], "#### 70000");
  EXPECT_EQ(samples[0]["shots"], nlohmann::json(kShots[0]));

  const std::string table = FormatGsm8kTable(r, 5);
  EXPECT_NE(table.find("|gsm8k|      3|flexible-extract|     5|exact_match|↑  |0.7143|±  |0.1844|"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("|     |       |strict-match    |     5|exact_match|↑  |0.5714|±  |0.2020|"),
            std::string::npos)
      << table;
}

TEST_F(EvalGsm8k, LimitKeepsTheSameShots) {
  options.limit = 2;
  options.concurrency = 1;
  options.model = "named-model";
  const Gsm8kResult r = RunGsm8kEval(options);
  EXPECT_EQ(r.num_samples, 2u);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(requests[i]["prompt"], gsm8k::LmEvalPrompt(train, kShots[i], test[i]));
    EXPECT_EQ(requests[i]["model"], "named-model");
  }
  EXPECT_DOUBLE_EQ(r.metrics[0].value, 1.0);
  EXPECT_DOUBLE_EQ(r.metrics[0].std_error, 0.0);
}

TEST_F(EvalGsm8k, VllmScoring) {
  options.scoring = Gsm8kScoring::kVllm;
  const Gsm8kResult r = RunGsm8kEval(options);
  ASSERT_EQ(r.metrics.size(), 2u);
  EXPECT_EQ(r.metrics[0].name, "accuracy");
  EXPECT_DOUBLE_EQ(r.metrics[0].value, 0.7142857142857143);
  EXPECT_NEAR(r.metrics[0].std_error, 0.18442777839082938, 1e-15);
  EXPECT_EQ(r.metrics[1].name, "invalid_rate");
  EXPECT_DOUBLE_EQ(r.metrics[1].value, 0.14285714285714285);
  for (const auto& req : server.requests()) {
    const size_t doc = DocOf(req.at("prompt"));
    EXPECT_EQ(req.at("prompt"), gsm8k::VllmPrompt(train, 5, test[doc]));
    EXPECT_EQ(req.at("stop"), (nlohmann::json{"Question", "Assistant:", "<|separator|>"}));
  }
  EXPECT_EQ(r.report["samples"][6]["extracted"], "[invalid]");
}

TEST_F(EvalGsm8k, FailedRequestsAreCountedAndScoredWrong) {
  options.max_retries = 0;
  server.FailNext(1000, 500);
  const Gsm8kResult r = RunGsm8kEval(options);
  EXPECT_EQ(r.failed_requests, 7u);
  EXPECT_DOUBLE_EQ(r.metrics[0].value, 0.0);
  EXPECT_TRUE(r.report["samples"][0].contains("error"));
}

TEST_F(EvalGsm8k, MissingDataIsAnError) {
  options.data_path = dir.File("absent.jsonl");
  EXPECT_THROW(RunGsm8kEval(options), Error);
}

}  // namespace
}  // namespace moeserve::client
