#include "client/openai_client.h"

#include <gtest/gtest.h>

#include "core/check.h"
#include "fake_openai_server.h"

namespace moeserve::client {
namespace {

TEST(ParseBaseUrl, AcceptsOpenAIAndLmEvalForms) {
  for (const std::string url : {"http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1/",
                                "http://127.0.0.1:8000/v1/completions", "http://127.0.0.1:8000"}) {
    const Endpoint e = ParseBaseUrl(url);
    EXPECT_EQ(e.scheme_host_port, "http://127.0.0.1:8000") << url;
    EXPECT_EQ(e.CompletionsPath(), "/v1/completions") << url;
  }
  EXPECT_EQ(ParseBaseUrl("https://api.example.com/openai/v2").CompletionsPath(),
            "/openai/v2/completions");
  EXPECT_THROW(ParseBaseUrl("127.0.0.1:8000/v1"), Error);
  EXPECT_THROW(ParseBaseUrl("ftp://host/v1"), Error);
}

TEST(SseParser, EventsSplitAnywhere) {
  const std::string stream =
      ": comment\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata: line1\ndata: line2\n\ndata:[DONE]\n\n";
  // Every split point must give the same events.
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    SseParser p;
    std::vector<std::string> events;
    const auto on = [&](std::string_view d) { events.emplace_back(d); };
    p.Feed(std::string_view(stream).substr(0, cut), on);
    p.Feed(std::string_view(stream).substr(cut), on);
    p.Finish(on);
    ASSERT_EQ(events, (std::vector<std::string>{"{\"a\":1}", "line1\nline2", "[DONE]"})) << cut;
  }
  SseParser p;  // a last event without its blank line is still delivered by Finish
  std::vector<std::string> events;
  const auto on = [&](std::string_view d) { events.emplace_back(d); };
  p.Feed("data: tail", on);
  EXPECT_TRUE(events.empty());
  p.Finish(on);
  EXPECT_EQ(events, std::vector<std::string>{"tail"});
}

ClientOptions FastRetries(int max_retries) {
  ClientOptions o;
  o.max_retries = max_retries;
  o.retry_backoff_s = 0.01;
  return o;
}

TEST(OpenAIClient, CompleteAndStream) {
  testing::FakeOpenAIServer server([](const nlohmann::json&) { return "one two three"; });
  OpenAIClient client(ParseBaseUrl(server.base_url()), FastRetries(0));
  const auto res = client.Complete({{"model", "m"}, {"prompt", "hi"}, {"max_tokens", 8}});
  EXPECT_EQ(res["choices"][0]["text"], "one two three");
  std::string text;
  size_t usage_events = 0;
  client.StreamComplete({{"model", "m"},
                         {"prompt", "hi"},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}}},
                        [&](const nlohmann::json& e) {
                          if (!e["choices"].empty())
                            text += e["choices"][0]["text"].get<std::string>();
                          if (e.contains("usage")) ++usage_events;
                        });
  EXPECT_EQ(text, "one two three");
  EXPECT_EQ(usage_events, 1u);
  EXPECT_EQ(FirstServedModel(ParseBaseUrl(server.base_url()), {}), "fake-model");
}

TEST(OpenAIClient, RetriesTransientFailuresOnly) {
  testing::FakeOpenAIServer server([](const nlohmann::json&) { return "ok"; });
  {
    OpenAIClient client(ParseBaseUrl(server.base_url()), FastRetries(3));
    server.FailNext(2, 503);
    EXPECT_EQ(client.Complete({{"prompt", "x"}})["choices"][0]["text"], "ok");
    EXPECT_EQ(client.retries(), 2u);
    server.FailNext(2, 429);
    std::string text;
    client.StreamComplete({{"prompt", "x"}, {"stream", true}}, [&](const nlohmann::json& e) {
      if (!e["choices"].empty()) text += e["choices"][0]["text"].get<std::string>();
    });
    EXPECT_EQ(text, "ok");
    EXPECT_EQ(client.retries(), 4u);
  }
  {
    OpenAIClient client(ParseBaseUrl(server.base_url()), FastRetries(1));
    server.FailNext(3, 503);
    EXPECT_THROW(client.Complete({{"prompt", "x"}}), Error);
    server.FailNext(0);
  }
  {
    OpenAIClient client(ParseBaseUrl(server.base_url()), FastRetries(5));
    server.FailNext(1, 400);
    try {
      client.Complete({{"prompt", "x"}});
      FAIL() << "a 400 must not be retried into success";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("injected failure"), std::string::npos) << e.what();
    }
    EXPECT_EQ(client.retries(), 0u);
  }
}

TEST(OpenAIClient, ConnectionRefusedIsRetriedThenReported) {
  int port;
  {
    testing::FakeOpenAIServer server([](const nlohmann::json&) { return ""; });
    port = std::stoi(server.root_url().substr(server.root_url().rfind(':') + 1));
  }  // the port is closed now
  OpenAIClient client(ParseBaseUrl("http://127.0.0.1:" + std::to_string(port) + "/v1"),
                      FastRetries(2));
  EXPECT_THROW(client.Complete({{"prompt", "x"}}), Error);
  EXPECT_EQ(client.retries(), 2u);
}

}  // namespace
}  // namespace moeserve::client
