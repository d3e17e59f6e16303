// bench serve against the fake server: the requests it sends and the accounting of the results.
// Timings are only checked for consistency with each other, never against wall-clock bounds.
#include "client/bench_serve.h"

#include <gtest/gtest.h>

#include "client/stats.h"
#include "core/check.h"
#include "fake_openai_server.h"
#include "test_util.h"

namespace moeserve::client {
namespace {

ServeBenchOptions SmallRun(const std::string& url) {
  ServeBenchOptions o;
  o.base_url = url;
  o.num_prompts = 12;
  o.max_concurrency = 3;
  o.random_input_len = 20;
  o.random_output_len = 5;
  o.random_vocab_size = 1000;
  o.progress = false;
  return o;
}

TEST(Stats, NumpyDefinitions) {
  // np.percentile([1, 2, 3, 4], 99) == 3.97, np.median == 2.5, np.std == sqrt(1.25)
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 99), 3.97);
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_DOUBLE_EQ(StdDev({1, 2, 3, 4}), std::sqrt(1.25));
  EXPECT_DOUBLE_EQ(Mean({}), 0.0);
  EXPECT_DOUBLE_EQ(Percentile({}, 99), 0.0);
}

TEST(RandomDataset, LengthsIdsAndDeterminism) {
  ServeBenchOptions o = SmallRun("http://unused");
  o.num_prompts = 200;
  o.random_range_ratio = 0.5;
  const auto a = MakeRandomRequests(o);
  const auto b = MakeRandomRequests(o);
  ASSERT_EQ(a.size(), 200u);
  size_t min_in = 1000, max_in = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].prompt_ids, b[i].prompt_ids);
    EXPECT_GE(a[i].output_len, 2u);  // int(5 * 0.5)
    EXPECT_LE(a[i].output_len, 7u);  // int(5 * 1.5)
    min_in = std::min(min_in, a[i].prompt_ids.size());
    max_in = std::max(max_in, a[i].prompt_ids.size());
    for (size_t j = 0; j < a[i].prompt_ids.size(); ++j) {
      ASSERT_LT(a[i].prompt_ids[j], 1000);
      if (j) {
        ASSERT_EQ(a[i].prompt_ids[j], (a[i].prompt_ids[j - 1] + 1) % 1000);
      }
    }
  }
  EXPECT_EQ(min_in, 10u);  // 200 draws cover both ends of [10, 30]
  EXPECT_EQ(max_in, 30u);
  o.seed = 1;
  EXPECT_NE(MakeRandomRequests(o)[0].prompt_ids, a[0].prompt_ids);
}

TEST(BenchServe, StreamsEveryRequestAndAccountsTokens) {
  testing::FakeOpenAIServer server([](const nlohmann::json&) { return ""; });
  server.set_chunk_delay_ms(1);
  const ServeBenchOptions o = SmallRun(server.root_url());  // vLLM's form: no /v1
  const ServeBenchResult r = RunServeBench(o);
  EXPECT_EQ(r.completed, 12u);
  EXPECT_EQ(r.failed, 0u);
  EXPECT_EQ(r.total_input_tokens, 12u * 20);
  EXPECT_EQ(r.total_output_tokens, 12u * 5);
  EXPECT_LE(server.max_in_flight(), 3u);
  EXPECT_GE(server.max_in_flight(), 1u);
  EXPECT_DOUBLE_EQ(r.request_throughput, 12 / r.duration_s);
  EXPECT_DOUBLE_EQ(r.output_throughput, 60 / r.duration_s);
  EXPECT_DOUBLE_EQ(r.total_token_throughput, 300 / r.duration_s);

  std::vector<double> tpots_ms, itls_ms;
  for (const RequestOutcome& q : r.requests) {
    ASSERT_TRUE(q.success) << q.error;
    EXPECT_EQ(q.output_tokens, 5u);
    ASSERT_EQ(q.itl_s.size(), 4u);  // one gap per chunk after the first
    EXPECT_GT(q.ttft_s, 0);
    double sum_itl = 0;
    for (double g : q.itl_s) sum_itl += g;
    EXPECT_NEAR(q.ttft_s + sum_itl, q.latency_s, 1e-9);  // the chunks tile the request
    tpots_ms.push_back((q.latency_s - q.ttft_s) / 4 * 1000);
    for (double g : q.itl_s) itls_ms.push_back(g * 1000);
  }
  EXPECT_NEAR(r.tpot.mean_ms, Mean(tpots_ms), 1e-9);
  EXPECT_NEAR(r.itl.p99_ms, Percentile(itls_ms, 99), 1e-9);

  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 12u);
  for (const auto& req : requests) {
    EXPECT_EQ(req.at("model"), "fake-model");
    EXPECT_EQ(req.at("prompt").size(), 20u);
    EXPECT_TRUE(req.at("prompt")[0].is_number_integer());
    EXPECT_EQ(req.at("max_tokens"), 5);
    EXPECT_EQ(req.at("ignore_eos"), true);
    EXPECT_EQ(req.at("stream"), true);
    EXPECT_EQ(req.at("stream_options").at("include_usage"), true);
  }

  const std::string report = FormatServeBenchReport(r, o);
  EXPECT_NE(report.find("Successful requests:                     12"), std::string::npos)
      << report;
  EXPECT_NE(report.find("Total generated tokens:                  60"), std::string::npos);
  EXPECT_NE(report.find("Mean TTFT (ms):"), std::string::npos);
  EXPECT_NE(report.find("P99 ITL (ms):"), std::string::npos);
  const nlohmann::json j = ServeBenchJson(r, o);
  EXPECT_EQ(j["completed"], 12);
  EXPECT_EQ(j["total_output_tokens"], 60);
  EXPECT_EQ(j["itls"].size(), 12u);
  EXPECT_DOUBLE_EQ(j["mean_ttft_ms"].get<double>(), r.ttft.mean_ms);
}

TEST(BenchServe, CountsChunksWithoutUsageAndPacesArrivals) {
  testing::FakeOpenAIServer server([](const nlohmann::json&) { return ""; });
  server.set_send_usage(false);
  ServeBenchOptions o = SmallRun(server.base_url());
  o.max_concurrency = 0;
  o.num_prompts = 6;
  o.request_rate = 500;  // Poisson arrivals, ~12 ms in all
  const ServeBenchResult r = RunServeBench(o);
  EXPECT_EQ(r.completed, 6u);
  EXPECT_EQ(r.total_output_tokens, 30u);
  for (const auto& q : r.requests) EXPECT_EQ(q.output_tokens, 5u);
}

// A stream that a server ends with an error event is a failed request, not a short success.
TEST(BenchServe, StreamErrorEventIsAFailedRequest) {
  testing::FakeOpenAIServer server([](const nlohmann::json&) { return ""; });
  server.set_stream_error_after(2);
  ServeBenchOptions o = SmallRun(server.base_url());
  o.num_prompts = 3;
  const ServeBenchResult r = RunServeBench(o);
  EXPECT_EQ(r.completed, 0u);
  EXPECT_EQ(r.failed, 3u);
  EXPECT_NE(r.requests[0].error.find("error event"), std::string::npos) << r.requests[0].error;
}

TEST(BenchServe, UnreachableServerFailsEveryRequest) {
  int port;
  {
    testing::FakeOpenAIServer server([](const nlohmann::json&) { return ""; });
    port = std::stoi(server.root_url().substr(server.root_url().rfind(':') + 1));
  }
  ServeBenchOptions o = SmallRun("http://127.0.0.1:" + std::to_string(port));
  o.model = "m";  // no /v1/models to ask
  o.num_prompts = 3;
  const ServeBenchResult r = RunServeBench(o);
  EXPECT_EQ(r.completed, 0u);
  EXPECT_EQ(r.failed, 3u);
  EXPECT_FALSE(r.requests[0].error.empty());
  EXPECT_EQ(RunServeBenchmark(o), 1);
}

TEST(BenchServe, CliOptionsParse) {
  CLI::App app;
  ServeBenchOptions o;
  AddServeBenchOptions(app, o);
  const char* argv[] = {"x",          "--base-url",
                        "http://h:1", "--num-prompts",
                        "7",          "--request-rate",
                        "inf",        "--max-concurrency",
                        "2",          "--random-input-len",
                        "9",          "--random-output-len",
                        "4",          "--seed",
                        "3",          "--no-progress"};
  app.parse(static_cast<int>(std::size(argv)), const_cast<char**>(argv));
  EXPECT_EQ(o.base_url, "http://h:1");
  EXPECT_EQ(o.num_prompts, 7u);
  EXPECT_TRUE(std::isinf(o.request_rate));
  EXPECT_EQ(o.max_concurrency, 2u);
  EXPECT_EQ(o.random_input_len, 9u);
  EXPECT_EQ(o.random_output_len, 4u);
  EXPECT_EQ(o.seed, 3u);
  EXPECT_FALSE(o.progress);
}

}  // namespace
}  // namespace moeserve::client
