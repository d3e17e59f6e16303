// Unit tests of the server pieces that need no HTTP: the scripted engine's contract (the one the
// end-to-end tests rely on), metrics exposition, and JSON field readers.
#include <gtest/gtest.h>

#include <atomic>
#include <future>

#include "engine/scripted_engine.h"
#include "server/api_error.h"
#include "server/metrics.h"
#include "server/request_parsing.h"
#include "server/response_store.h"

namespace moeserve {
namespace {

class Collect final : public engine::RequestSink {
 public:
  explicit Collect(int stop_after = -1) : stop_after_(stop_after) {}
  std::optional<std::string> OnOutput(const engine::EngineOutput& out) override {
    tokens.insert(tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
    logprobs += out.new_logprobs.size();
    if (out.finished) Done(engine::FinishReasonName(out.reason));
    if (stop_after_ >= 0 && static_cast<int>(tokens.size()) == stop_after_) {
      Done("stop-string");
      return "xyz";
    }
    return std::nullopt;
  }
  void Done(std::string r) {
    reason = std::move(r);
    done.set_value();
  }
  std::vector<int32_t> tokens;
  size_t logprobs = 0;
  std::string reason;
  std::promise<void> done;
  int stop_after_;
};

engine::ScriptedEngineConfig Config() {
  engine::ScriptedEngineConfig c;
  c.reply = {10, 11, 12, 13, 14};
  c.eos_token_ids = {2};
  c.vocab_size = 100;
  c.max_model_len = 64;
  c.tick = std::chrono::microseconds(100);
  return c;
}

std::string Finish(std::shared_ptr<Collect> sink) {
  EXPECT_EQ(sink->done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  return sink->reason;
}

TEST(ScriptedEngine, ReplaysThenEos) {
  engine::ScriptedEngine eng(Config());
  auto sink = std::make_shared<Collect>();
  engine::SamplingParams p;
  p.max_tokens = 50;
  p.logprobs = 0;
  ASSERT_EQ(eng.AddRequest(1, {1, 2, 3}, p, sink), "");
  EXPECT_EQ(Finish(sink), "stop");
  EXPECT_EQ(sink->tokens, (std::vector<int32_t>{10, 11, 12, 13, 14, 2}));
  EXPECT_EQ(sink->logprobs, 6u);
}

TEST(ScriptedEngine, MaxTokensStopTokenIdsAndStopStrings) {
  engine::ScriptedEngine eng(Config());
  engine::SamplingParams p;
  p.max_tokens = 3;
  auto a = std::make_shared<Collect>();
  ASSERT_EQ(eng.AddRequest(1, {1}, p, a), "");
  p.max_tokens = 50;
  p.stop_token_ids = {12};
  auto b = std::make_shared<Collect>();
  ASSERT_EQ(eng.AddRequest(2, {1}, p, b), "");
  p.stop_token_ids = {};
  auto c = std::make_shared<Collect>(/*stop_after=*/2);
  ASSERT_EQ(eng.AddRequest(3, {1}, p, c), "");
  EXPECT_EQ(Finish(a), "length");
  EXPECT_EQ(a->tokens.size(), 3u);
  EXPECT_EQ(Finish(b), "stop");
  EXPECT_EQ(b->tokens, (std::vector<int32_t>{10, 11, 12}));
  EXPECT_EQ(Finish(c), "stop-string");
  EXPECT_EQ(c->tokens.size(), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(c->tokens.size(), 2u) << "no call after the sink returned a stop string";
  EXPECT_EQ(eng.Stats().num_running, 0u);
}

TEST(ScriptedEngine, RefusesBadRequestsAndAborts) {
  auto cfg = Config();
  cfg.reply.assign(10000, 7);
  cfg.tick = std::chrono::milliseconds(5);
  engine::ScriptedEngine eng(cfg);
  engine::SamplingParams p;
  p.max_tokens = 60;
  EXPECT_NE(eng.AddRequest(1, std::vector<int32_t>(10, 1), p, std::make_shared<Collect>()), "");
  EXPECT_NE(eng.AddRequest(1, {}, p, std::make_shared<Collect>()), "");
  EXPECT_NE(eng.AddRequest(1, {100}, p, std::make_shared<Collect>()), "");
  p.max_tokens = 40;
  auto sink = std::make_shared<Collect>();
  ASSERT_EQ(eng.AddRequest(1, std::vector<int32_t>(20, 1), p, sink), "");
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(eng.Stats().num_running, 1u);
  EXPECT_EQ(eng.Stats().kv_blocks_used, 2u);  // 20 prompt + a few output tokens, blocks of 16
  eng.Abort(1);
  const size_t n = sink->tokens.size();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(eng.Stats().num_running, 0u);
  EXPECT_EQ(eng.Stats().kv_blocks_used, 0u);
  EXPECT_EQ(sink->tokens.size(), n);  // nothing after Abort returned
  EXPECT_LT(sink->tokens.size(), 40u);
}

// The Abort contract (engine_interface.h): a sink call in progress when Abort is called is over
// when Abort returns.
TEST(ScriptedEngine, AbortWaitsForTheSinkCallInProgress) {
  class SlowSink final : public engine::RequestSink {
   public:
    std::optional<std::string> OnOutput(const engine::EngineOutput&) override {
      entered.set_value();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      left = true;
      return std::nullopt;
    }
    std::promise<void> entered;
    std::atomic<bool> left{false};
  };
  engine::ScriptedEngine eng(Config());
  auto sink = std::make_shared<SlowSink>();
  engine::SamplingParams p;
  p.max_tokens = 1;  // one call only
  ASSERT_EQ(eng.AddRequest(1, {1, 2}, p, sink), "");
  sink->entered.get_future().wait();
  eng.Abort(1);
  EXPECT_TRUE(sink->left.load());
}

TEST(Metrics, HistogramIsCumulative) {
  server::Histogram h({1.0, 2.0});
  h.Observe(0.5);
  h.Observe(1.5);
  h.Observe(9.0);
  std::string out;
  h.Render("m", "a=\"b\"", out);
  EXPECT_NE(out.find("m_bucket{a=\"b\",le=\"1\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("m_bucket{a=\"b\",le=\"2\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("m_bucket{a=\"b\",le=\"+Inf\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("m_count{a=\"b\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("m_sum{a=\"b\"} 11\n"), std::string::npos) << out;
}

TEST(RequestParsing, TypedFields) {
  const auto j =
      server::ParseBody(R"({"a": 3, "b": 3.0, "c": 3.5, "d": true, "e": "x", "f": null})");
  EXPECT_EQ(server::GetInt(j, "a"), 3);
  EXPECT_EQ(server::GetInt(j, "b"), 3);
  EXPECT_THROW(server::GetInt(j, "c"), server::ApiError);
  EXPECT_THROW(server::GetInt(j, "d"), server::ApiError);
  EXPECT_THROW(server::GetNumber(j, "e"), server::ApiError);
  EXPECT_EQ(server::GetBool(j, "d"), true);
  EXPECT_FALSE(server::GetString(j, "f").has_value());
  EXPECT_FALSE(server::GetString(j, "missing").has_value());
  EXPECT_THROW(server::ParseBody("[1]"), server::ApiError);
  EXPECT_THROW(server::ParseBody("{\"a\": \"\xff\"}"), server::ApiError);
}

}  // namespace
}  // namespace moeserve

namespace moeserve::server {
namespace {

ResponseStore::Entry Entry(const std::string& text) {
  return {Json{{"text", text}}, Json::array({Json{{"role", "user"}, {"content", text}}})};
}

TEST(ResponseStore, EvictsTheLeastRecentlyUsedPastTheCount) {
  ResponseStore store(/*max_entries=*/2, /*max_bytes=*/1 << 20);
  store.Put("a", Entry("1"));
  store.Put("b", Entry("2"));
  ASSERT_TRUE(store.Get("a"));  // a is now the most recent
  store.Put("c", Entry("3"));
  EXPECT_TRUE(store.Get("a"));
  EXPECT_FALSE(store.Get("b"));
  EXPECT_TRUE(store.Get("c"));
  EXPECT_EQ(store.Get("c")->response["text"], "3");
  EXPECT_EQ(store.size(), 2u);
}

TEST(ResponseStore, BoundedByBytesAndRefusesAnEntryTooLargeAlone) {
  ResponseStore store(/*max_entries=*/100, /*max_bytes=*/400);
  store.Put("big", Entry(std::string(1000, 'x')));
  EXPECT_FALSE(store.Get("big"));
  for (int i = 0; i < 10; ++i) store.Put("k" + std::to_string(i), Entry(std::string(50, 'y')));
  EXPECT_LT(store.size(), 10u);
  EXPECT_TRUE(store.Get("k9"));
  EXPECT_FALSE(store.Get("k0"));
}

}  // namespace
}  // namespace moeserve::server
