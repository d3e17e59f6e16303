// A tiny OpenAI-compatible server for the client tests: /v1/models and /v1/completions, plain and
// streamed (SSE). The completion text comes from a test-supplied function of the request; "stop"
// strings are honoured the way real servers do (the text is cut before the first one). Streams
// send one chunk per whitespace-separated piece of the text, or, with ignore_eos, exactly
// max_tokens chunks. It records every request and the most requests it ever had in flight.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace moeserve::client::testing {

class FakeOpenAIServer {
 public:
  using Responder = std::function<std::string(const nlohmann::json& request)>;

  explicit FakeOpenAIServer(Responder responder) : responder_(std::move(responder)) {
    server_.new_task_queue = [] { return new httplib::ThreadPool(32); };
    server_.set_keep_alive_max_count(100000);
    server_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object":"list","data":[{"id":"fake-model","object":"model"}]})",
                      "application/json");
    });
    server_.Post("/v1/completions",
                 [this](const httplib::Request& req, httplib::Response& res) { Handle(req, res); });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  ~FakeOpenAIServer() {
    server_.stop();
    thread_.join();
  }

  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  std::string root_url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // The next `n` completion requests get HTTP `status` (503: retried by clients; 400: not).
  void FailNext(size_t n, int status = 503) {
    fail_next_ = n;
    fail_status_ = status;
  }
  void set_chunk_delay_ms(int ms) { chunk_delay_ms_ = ms; }
  void set_send_usage(bool on) { send_usage_ = on; }
  // Streams end after `n` chunks with an SSE error event and no [DONE], as llama-server does when
  // its output parser rejects what the model wrote (0: never).
  void set_stream_error_after(size_t n) { stream_error_after_ = n; }

  std::vector<nlohmann::json> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }
  size_t max_in_flight() const { return max_in_flight_; }

 private:
  static std::vector<std::string> Pieces(const std::string& text) {
    std::vector<std::string> pieces;  // each piece keeps its leading whitespace
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find_first_not_of(" \n", start);
      end = end == std::string::npos ? text.size() : text.find_first_of(" \n", end);
      if (end == std::string::npos) end = text.size();
      pieces.push_back(text.substr(start, end - start));
      start = end;
    }
    return pieces;
  }

  void Enter() {
    const size_t now = ++in_flight_;
    size_t seen = max_in_flight_.load();
    while (now > seen && !max_in_flight_.compare_exchange_weak(seen, now)) {
    }
  }

  void Handle(const httplib::Request& req, httplib::Response& res) {
    Enter();
    nlohmann::json body = nlohmann::json::parse(req.body);
    {
      std::lock_guard lock(mu_);
      requests_.push_back(body);
    }
    if (fail_next_ > 0) {
      --fail_next_;
      --in_flight_;
      res.status = fail_status_;
      res.set_content(R"({"error":{"message":"injected failure"}})", "application/json");
      return;
    }
    std::string text = responder_(body);
    if (body.contains("stop") && body["stop"].is_array()) {
      size_t cut = text.size();
      for (const auto& s : body["stop"]) cut = std::min(cut, text.find(s.get<std::string>()));
      text.resize(cut);
    }
    size_t prompt_tokens = body["prompt"].is_array() ? body["prompt"].size() : 1;
    std::vector<std::string> pieces;
    if (body.value("ignore_eos", false)) {
      for (size_t i = 0; i < body.at("max_tokens").get<size_t>(); ++i)
        pieces.push_back(" t" + std::to_string(i));
    } else {
      pieces = Pieces(text);
    }
    if (!body.value("stream", false)) {
      std::string all;
      for (const auto& p : pieces) all += p;
      nlohmann::json out = {{"id", "cmpl-fake"},
                            {"object", "text_completion"},
                            {"model", "fake-model"},
                            {"choices", {{{"index", 0}, {"text", all}, {"finish_reason", "stop"}}}},
                            {"usage",
                             {{"prompt_tokens", prompt_tokens},
                              {"completion_tokens", pieces.size()},
                              {"total_tokens", prompt_tokens + pieces.size()}}}};
      res.set_content(out.dump(), "application/json");
      --in_flight_;
      return;
    }
    const bool usage = send_usage_ && body.contains("stream_options") &&
                       body["stream_options"].value("include_usage", false);
    auto events = std::make_shared<std::vector<std::string>>();
    for (size_t i = 0; i < pieces.size(); ++i) {
      nlohmann::json chunk = {{"id", "cmpl-fake"},
                              {"object", "text_completion"},
                              {"choices",
                               {{{"index", 0},
                                 {"text", pieces[i]},
                                 {"finish_reason", i + 1 == pieces.size() ? nlohmann::json("length")
                                                                          : nlohmann::json()}}}}};
      events->push_back("data: " + chunk.dump() + "\n\n");
    }
    if (stream_error_after_ > 0 && events->size() > stream_error_after_) {
      events->resize(stream_error_after_);
      events->push_back(
          "data: {\"error\":{\"code\":500,\"message\":\"The model produced output that does not "
          "match the expected Content-only format\",\"type\":\"server_error\"}}\n\n");
    } else if (usage) {
      nlohmann::json u = {{"id", "cmpl-fake"},
                          {"object", "text_completion"},
                          {"choices", nlohmann::json::array()},
                          {"usage",
                           {{"prompt_tokens", prompt_tokens},
                            {"completion_tokens", pieces.size()},
                            {"total_tokens", prompt_tokens + pieces.size()}}}};
      events->push_back("data: " + u.dump() + "\n\n");
    }
    if (stream_error_after_ == 0 || events->back().find("\"error\"") == std::string::npos)
      events->push_back("data: [DONE]\n\n");
    auto next = std::make_shared<size_t>(0);
    // Leaves the in-flight count before the last bytes go out, so a client that sends its next
    // request as soon as this stream ends is never counted twice.
    auto left = std::make_shared<std::atomic<bool>>(false);
    const auto leave = [this, left] {
      if (!left->exchange(true)) --in_flight_;
    };
    const int delay_ms = chunk_delay_ms_;
    res.set_chunked_content_provider(
        "text/event-stream",
        [events, next, delay_ms, leave](size_t, httplib::DataSink& sink) {
          if (*next == events->size()) {
            leave();
            sink.done();
            return true;
          }
          if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
          const std::string& e = (*events)[(*next)++];
          return sink.write(e.data(), e.size());
        },
        [leave](bool) { leave(); });
  }

  Responder responder_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<nlohmann::json> requests_;
  std::atomic<size_t> in_flight_{0}, max_in_flight_{0}, fail_next_{0}, stream_error_after_{0};
  std::atomic<int> fail_status_{503}, chunk_delay_ms_{0};
  std::atomic<bool> send_usage_{true};
};

}  // namespace moeserve::client::testing
