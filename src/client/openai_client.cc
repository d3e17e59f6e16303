#include "client/openai_client.h"

#include <httplib.h>

#include <chrono>
#include <exception>
#include <thread>

#include "core/check.h"

namespace moeserve::client {
namespace {

bool Transient(int status) {
  return status == 429 || status >= 500;
}

std::string Describe(int status, const std::string& body) {
  std::string msg = "HTTP " + std::to_string(status);
  try {  // OpenAI-style {"error": {"message": ...}}
    auto j = nlohmann::json::parse(body);
    if (j.contains("error") && j["error"].is_object() && j["error"].contains("message"))
      return msg + ": " + j["error"]["message"].get<std::string>();
  } catch (const nlohmann::json::exception&) {
  }
  return msg + ": " + body.substr(0, 500);
}

}  // namespace

Endpoint ParseBaseUrl(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) Fail("base URL needs a scheme (http:// or https://): ", url);
  const std::string scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") Fail("unsupported scheme in base URL: ", url);
  const size_t path_begin = url.find('/', scheme_end + 3);
  Endpoint e;
  e.scheme_host_port = url.substr(0, path_begin);
  if (e.scheme_host_port.size() <= scheme_end + 3) Fail("base URL has no host: ", url);
  std::string path = path_begin == std::string::npos ? "" : url.substr(path_begin);
  while (!path.empty() && path.back() == '/') path.pop_back();
  const std::string suffix = "/completions";
  if (path.size() >= suffix.size() &&
      path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0)
    path.resize(path.size() - suffix.size());
  e.api_prefix = path.empty() ? "/v1" : path;
  return e;
}

void SseParser::Feed(std::string_view bytes, const OnData& on_data) {
  pending_.append(bytes);
  size_t start = 0;
  for (size_t nl; (nl = pending_.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string_view line(pending_.data() + start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    Line(line, on_data);
  }
  pending_.erase(0, start);
}

void SseParser::Finish(const OnData& on_data) {
  if (!pending_.empty()) {
    std::string line = std::move(pending_);
    pending_.clear();
    Line(line, on_data);
  }
  Line("", on_data);
}

void SseParser::Line(std::string_view line, const OnData& on_data) {
  if (line.empty()) {  // a blank line dispatches the event
    if (has_data_) on_data(data_);
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line.substr(0, 5) != "data:") return;
  line.remove_prefix(5);
  if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  if (has_data_) data_ += '\n';
  data_.append(line);
  has_data_ = true;
}

std::string FirstServedModel(const Endpoint& endpoint, const ClientOptions& options) {
  httplib::Client http(endpoint.scheme_host_port);
  http.set_connection_timeout(
      std::chrono::microseconds(static_cast<int64_t>(options.connect_timeout_s * 1e6)));
  if (!options.api_key.empty()) http.set_bearer_token_auth(options.api_key.c_str());
  auto res = http.Get(endpoint.api_prefix + "/models");
  if (!res) Fail("GET ", endpoint.api_prefix, "/models failed: ", httplib::to_string(res.error()));
  if (res->status != 200)
    Fail("GET ", endpoint.api_prefix, "/models: ", Describe(res->status, res->body));
  try {
    auto j = nlohmann::json::parse(res->body);
    if (j.contains("data") && j["data"].is_array() && !j["data"].empty())
      return j["data"][0].at("id").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    Fail("GET /models: unexpected response: ", e.what());
  }
  Fail("the server lists no models; pass --model");
}

OpenAIClient::OpenAIClient(Endpoint endpoint, ClientOptions options)
    : endpoint_(std::move(endpoint)), options_(std::move(options)) {
  http_ = std::make_unique<httplib::Client>(endpoint_.scheme_host_port);
  if (!http_->is_valid()) Fail("cannot use base URL ", endpoint_.scheme_host_port);
  const auto to_us = [](double s) {
    return std::chrono::microseconds(static_cast<int64_t>(s * 1e6));
  };
  http_->set_connection_timeout(to_us(options_.connect_timeout_s));
  http_->set_read_timeout(to_us(options_.read_timeout_s));
  http_->set_write_timeout(to_us(options_.read_timeout_s));
  http_->set_keep_alive(true);
  // httplib writes a request's headers and body in two sends; with Nagle's algorithm on, the body
  // waits for the server's (delayed, up to 40 ms on Linux) ACK of the headers, which every TTFT
  // measured through this client carried (server-side TTFT 0.19 s, the client's 0.23 s). vLLM's
  // bench client (aiohttp) turns Nagle off too.
  http_->set_tcp_nodelay(true);
  if (!options_.api_key.empty()) http_->set_bearer_token_auth(options_.api_key.c_str());
}

OpenAIClient::~OpenAIClient() = default;

namespace {

// A request that failed to read or write before any response byte, on a connection kept alive
// from an earlier request: the server closed it in between. llama-server does this after every
// streamed response although it answers `Keep-Alive: timeout=5, max=100`. curl and the openai
// SDKs send such a request again on a new connection; so do we, once, outside the retry budget
// (the server never saw it: the request's bytes went into a dead socket). httplib has closed the
// socket, so the next send connects afresh.
bool DiedOnStaleConnection(httplib::Error e, int status) {
  return status == 0 && (e == httplib::Error::Read || e == httplib::Error::Write);
}

}  // namespace

void OpenAIClient::Backoff(int attempt) {
  ++retries_;
  std::this_thread::sleep_for(
      std::chrono::duration<double>(options_.retry_backoff_s * static_cast<double>(1 << attempt)));
}

nlohmann::json OpenAIClient::Complete(const nlohmann::json& body) {
  const std::string payload = body.dump();
  bool resent = false;
  for (int attempt = 0;; ++attempt) {
    auto res = http_->Post(endpoint_.CompletionsPath(), payload, "application/json");
    if (!res && !resent && DiedOnStaleConnection(res.error(), 0)) {
      resent = true;
      --attempt;
      continue;
    }
    if (!res) {
      if (ShouldRetry(attempt)) {
        Backoff(attempt);
        continue;
      }
      Fail("POST ", endpoint_.scheme_host_port, endpoint_.CompletionsPath(),
           " failed: ", httplib::to_string(res.error()));
    }
    if (res->status != 200) {
      if (Transient(res->status) && ShouldRetry(attempt)) {
        Backoff(attempt);
        continue;
      }
      Fail("POST ", endpoint_.CompletionsPath(), ": ", Describe(res->status, res->body));
    }
    try {
      return nlohmann::json::parse(res->body);
    } catch (const nlohmann::json::exception& e) {
      Fail("completions response is not JSON: ", e.what());
    }
  }
}

void OpenAIClient::StreamComplete(const nlohmann::json& body,
                                  const std::function<void(const nlohmann::json&)>& on_event) {
  const std::string payload = body.dump();
  bool resent = false;
  for (int attempt = 0;; ++attempt) {
    int status = 0;
    std::string error_body;
    bool got_event = false, done = false;
    SseParser parser;
    // Nothing may throw through httplib's read loop: a failure is kept and the read aborted.
    std::exception_ptr failure;
    const auto on_data = [&](std::string_view data) {
      if (done || failure) return;
      if (data == "[DONE]") {
        done = true;
        return;
      }
      try {
        nlohmann::json event;
        try {
          event = nlohmann::json::parse(data);
        } catch (const nlohmann::json::exception& e) {
          Fail("stream event is not JSON: ", e.what(), ": ", std::string(data.substr(0, 200)));
        }
        got_event = true;
        // A server that gives up mid-stream says so in an event of its own (llama-server:
        // `{"error": {"code": 500, ...}}`, then no [DONE]); the OpenAI SDKs raise it. Taken as
        // a chunk it ended the request early as if complete, which flattered such a server in
        // `bench serve` (fewer tokens, earlier finishes, shorter queues).
        if (event.is_object() && event.contains("error")) {
          const nlohmann::json& err = event["error"];
          Fail("the stream ended with an error event: ",
               err.is_object() && err.contains("message") && err["message"].is_string()
                   ? err["message"].get<std::string>()
                   : err.dump());
        }
        on_event(event);
      } catch (...) {
        failure = std::current_exception();
      }
    };
    httplib::Request req;
    req.method = "POST";
    req.path = endpoint_.CompletionsPath();
    req.body = payload;
    req.set_header("Content-Type", "application/json");
    req.set_header("Accept", "text/event-stream");
    req.response_handler = [&](const httplib::Response& r) {
      status = r.status;
      return true;
    };
    req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
      if (status != 200) {
        error_body.append(data, len);
        return true;
      }
      parser.Feed(std::string_view(data, len), on_data);
      return !failure;
    };
    auto res = http_->send(req);
    if (status == 200 && !failure) parser.Finish(on_data);
    if (failure) std::rethrow_exception(failure);
    if (!res && !got_event && !resent && DiedOnStaleConnection(res.error(), status)) {
      resent = true;
      --attempt;
      continue;
    }
    if (!res) {
      if (!got_event && ShouldRetry(attempt)) {
        Backoff(attempt);
        continue;
      }
      Fail("streamed POST ", endpoint_.CompletionsPath(), " failed",
           got_event ? " mid-stream: " : ": ", httplib::to_string(res.error()));
    }
    if (status != 200) {
      if (Transient(status) && ShouldRetry(attempt)) {
        Backoff(attempt);
        continue;
      }
      Fail("POST ", endpoint_.CompletionsPath(), ": ", Describe(status, error_body));
    }
    return;
  }
}

}  // namespace moeserve::client
