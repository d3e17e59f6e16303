// The OpenAI-compatible HTTP server: routing, API-key check, body-size limit, error bodies,
// and graceful drain. Routes:
//   POST /v1/completions, /v1/chat/completions     (completions.cc, chat_completions.cc)
//   GET  /v1/models, /health, /metrics, /version
//   POST /tokenize, /detokenize
// With an API key configured, every route but /health, /metrics, /version requires
// `Authorization: Bearer <api_key>` (api_key.h).
//
// Threads: Run() blocks the caller; each connection is served by a pool thread
// (config.http_threads of them). RequestShutdown() is async-signal-unsafe but thread-safe: call it
// from a signal-watching thread.
#pragma once

#include <memory>

#include "server/serving_context.h"

namespace httplib {
class Server;
}

namespace moeserve::server {

class HttpServer {
 public:
  explicit HttpServer(ServingContext& ctx);
  ~HttpServer();

  // Binds host:port; throws moeserve::Error when that fails. Then serves until RequestShutdown,
  // and returns once every handler has returned.
  void Run();
  // The port actually bound (after Run started; useful with port 0).
  int bound_port() const { return bound_port_.load(); }

  // Stops accepting, lets running requests finish for up to drain_timeout_s, then aborts the rest.
  // Returns when the wait is over (Run returns soon after).
  void RequestShutdown();

 private:
  void Register();
  ServingContext& ctx_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<int> bound_port_{0};
  std::atomic<int> active_requests_{0};
  std::atomic<bool> draining_{false};
};

}  // namespace moeserve::server
