#include "client/openai_client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

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

// An SSE error event mid-stream fails the request with the server's message (it is not a chunk).
TEST(OpenAIClient, StreamErrorEventFailsTheRequest) {
  testing::FakeOpenAIServer server([](const nlohmann::json&) { return "one two three four"; });
  server.set_stream_error_after(2);
  OpenAIClient client(ParseBaseUrl(server.base_url()), FastRetries(0));
  size_t chunks = 0;
  try {
    client.StreamComplete({{"model", "m"}, {"prompt", "hi"}, {"stream", true}},
                          [&](const nlohmann::json&) { ++chunks; });
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("does not match the expected Content-only format"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(chunks, 2u);
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

// Answers every request (a fixed completion, streamed or not) with `Keep-Alive`, then closes the
// connection without reading further, as llama-server does after each streamed response.
class ClosingServer {
 public:
  ClosingServer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    MOESERVE_CHECK(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0, "bind");
    socklen_t len = sizeof addr;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(fd_, 8);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ClosingServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  int requests() const { return requests_; }

 private:
  void Serve() {
    while (!stop_) {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string in;
      char buf[4096];
      size_t need = std::string::npos;  // header end + Content-Length, once known
      while (need == std::string::npos || in.size() < need) {
        const ssize_t n = read(c, buf, sizeof buf);
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
        const size_t end = in.find("\r\n\r\n");
        if (need == std::string::npos && end != std::string::npos) {
          const size_t cl = in.find("Content-Length: ");
          need = end + 4 + (cl == std::string::npos ? 0 : std::stoul(in.substr(cl + 16)));
        }
      }
      if (need == std::string::npos || in.size() < need) {
        close(c);
        continue;
      }
      ++requests_;
      const bool stream = in.find("\"stream\":true") != std::string::npos;
      const std::string json = R"({"choices":[{"index":0,"text":"ok","finish_reason":"stop"}]})";
      std::string out;
      if (stream) {
        const std::string events = "data: " + json + "\n\ndata: [DONE]\n\n";
        char size[16];
        std::snprintf(size, sizeof size, "%zx", events.size());
        out =
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: "
            "chunked\r\nKeep-Alive: timeout=5, max=100\r\n\r\n" +
            std::string(size) + "\r\n" + events + "\r\n0\r\n\r\n";
      } else {
        out =
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nKeep-Alive: timeout=5, "
            "max=100\r\nContent-Length: " +
            std::to_string(json.size()) + "\r\n\r\n" + json;
      }
      (void)!write(c, out.data(), out.size());
      // Despite Keep-Alive, close the connection, a moment later: the client has sent its next
      // request into it by then, which the server never reads.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      close(c);
    }
  }

  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

// Without retries (as `moeserve bench serve` runs), every request after the first met a socket
// the server had closed: "streamed POST /v1/completions failed: Read" on every other request
// against llama-server. Such a request is sent again on a new connection, outside the budget.
TEST(OpenAIClient, RequestOnAConnectionTheServerClosedIsSentAgain) {
  ClosingServer server;
  OpenAIClient client(ParseBaseUrl(server.base_url()), FastRetries(0));
  for (int i = 0; i < 4; ++i) {
    std::string text;
    client.StreamComplete({{"prompt", "x"}, {"stream", true}}, [&](const nlohmann::json& e) {
      text += e["choices"][0]["text"].get<std::string>();
    });
    EXPECT_EQ(text, "ok") << "stream " << i;
    EXPECT_EQ(client.Complete({{"prompt", "x"}})["choices"][0]["text"], "ok") << "request " << i;
  }
  EXPECT_EQ(server.requests(), 8);  // each answered once: nothing the server saw was sent twice
  EXPECT_EQ(client.retries(), 0u);
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
