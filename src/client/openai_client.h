// A blocking client for the legacy OpenAI completions endpoint (POST {base}/completions), plain
// and streamed (server-sent events). One OpenAIClient holds one keep-alive connection; use one per
// thread (httplib clients are not safe to share between concurrent requests).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace httplib {
class Client;
}

namespace moeserve::client {

// "http://host:8000/v1", "http://host:8000/v1/", "http://host:8000/v1/completions" (lm-eval's
// form) and "http://host:8000" (vLLM bench's form, taken to mean /v1) all name the same API.
struct Endpoint {
  std::string scheme_host_port;  // "http://host:8000"
  std::string api_prefix;        // "/v1"
  std::string CompletionsPath() const { return api_prefix + "/completions"; }
};
Endpoint ParseBaseUrl(const std::string& url);

struct ClientOptions {
  std::string api_key;  // sent as "Authorization: Bearer <key>" when not empty
  double connect_timeout_s = 10;
  double read_timeout_s = 600;   // one generation may take minutes on a CPU server
  int max_retries = 3;           // retries after the first try, for transient failures only
  double retry_backoff_s = 0.5;  // doubled after every retry
};

// Incremental parser of a text/event-stream body: feed bytes as they arrive, get each event's data
// (data lines of one event joined by "\n"). Comments, "event:" and "id:" fields are skipped.
class SseParser {
 public:
  using OnData = std::function<void(std::string_view data)>;
  void Feed(std::string_view bytes, const OnData& on_data);
  // Delivers a last event that was not closed by a blank line.
  void Finish(const OnData& on_data);

 private:
  void Line(std::string_view line, const OnData& on_data);
  std::string pending_;  // bytes of an incomplete line
  std::string data_;     // data of the event being read
  bool has_data_ = false;
};

// GET {base}/models and return the first model's id (what clients use when no model is named).
std::string FirstServedModel(const Endpoint& endpoint, const ClientOptions& options);

class OpenAIClient {
 public:
  OpenAIClient(Endpoint endpoint, ClientOptions options);
  ~OpenAIClient();
  OpenAIClient(const OpenAIClient&) = delete;
  OpenAIClient& operator=(const OpenAIClient&) = delete;

  // POSTs `body` to the completions endpoint and returns the parsed response. Connection errors,
  // 5xx and 429 are retried (bounded, with backoff); other failures throw moeserve::Error with
  // the server's message.
  nlohmann::json Complete(const nlohmann::json& body);

  // POSTs `body` (which should have "stream": true) and calls `on_event` with each SSE event's
  // JSON as it arrives, until "[DONE]" or the end of the stream. A try is retried only when it
  // failed before any event arrived, so `on_event` never sees a stream twice.
  void StreamComplete(const nlohmann::json& body,
                      const std::function<void(const nlohmann::json&)>& on_event);

  // Number of retries made so far (for reports and tests).
  size_t retries() const { return retries_; }

 private:
  bool ShouldRetry(int attempt) const { return attempt < options_.max_retries; }
  void Backoff(int attempt);

  Endpoint endpoint_;
  ClientOptions options_;
  std::unique_ptr<httplib::Client> http_;
  size_t retries_ = 0;
};

}  // namespace moeserve::client
