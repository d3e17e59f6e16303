// The OpenAI-compatible HTTP server: routing, API-key check, error bodies and graceful drain, over
// HttpTransport (connections, limits, deadlines, streaming). The routes are route_table.cc's
// table. With an API key configured, every route but /health, /metrics, /version requires
// `Authorization: Bearer <api_key>` (api_key.h). A method the server does not implement, or a
// known path with the wrong method, is 405 with an Allow field.
//
// Threads: Run() blocks the caller (the io thread); handlers that wait on the engine run on a pool
// of config.http_threads workers. RequestShutdown() is async-signal-unsafe but thread-safe: call
// it from a signal-watching thread.
#pragma once

#include <atomic>
#include <memory>

#include "server/http_transport.h"
#include "server/serving_context.h"

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

  // Stops accepting and closes idle connections, lets running requests (streams included) finish
  // for up to drain_timeout_s, then ends them: streams get a final "abort" chunk and [DONE],
  // other requests 503. Returns when the wait is over (Run returns soon after).
  void RequestShutdown();

 private:
  // The transport's router: answers cheap requests at once, hands engine work to the pool.
  Handler Route(const HttpRequest& req, HttpResponse& res);
  ServingContext& ctx_;
  std::unique_ptr<HttpTransport> transport_;
  std::atomic<int> bound_port_{0};
  std::atomic<bool> draining_{false};
};

}  // namespace moeserve::server
