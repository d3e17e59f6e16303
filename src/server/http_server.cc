#include "server/http_server.h"

#include <functional>
#include <string_view>

#include "core/check.h"
#include "core/log.h"
#include "server/api_error.h"
#include "server/api_key.h"
#include "server/cors.h"
#include "server/request_log.h"
#include "server/request_parsing.h"
#include "server/route_table.h"

namespace moeserve::server {
namespace {

void SendError(HttpResponse& res, int status, const std::string& message, const std::string& type,
               const std::string& param = "", const std::string& code = "",
               ErrorStyle style = ErrorStyle::kOpenAI) {
  res.status = status;
  res.SetContent(DumpJson(style == ErrorStyle::kAnthropic
                              ? AnthropicErrorBody(status, message)
                              : Json(ErrorBody(status, message, type, param, code))),
                 "application/json");
}

void SendJson(HttpResponse& res, const Json& j) {
  res.SetContent(DumpJson(j), "application/json");
}

// The transport's own errors (framing, limits, too many connections).
void TransportError(int status, const std::string& message, HttpResponse& res) {
  if (status == 413)
    SendError(res, 413, message, "invalid_request_error", "", "request_too_large");
  else if (status == 503)
    SendError(res, 503, message, "service_unavailable");
  else
    SendError(res, status, message, status >= 500 ? "server_error" : "invalid_request_error");
}

// Runs a handler, turning its exceptions into error responses, each logged with a request id.
void Guarded(ServingContext& ctx, const HttpRequest& req, HttpResponse& res, ErrorStyle style,
             const std::function<void(const HttpRequest&, HttpResponse&)>& fn) {
  std::string message;
  try {
    fn(req, res);
    return;
  } catch (const ApiError& e) {
    res = HttpResponse{};
    res.status = e.status();
    SendJson(res, style == ErrorStyle::kAnthropic ? AnthropicErrorBody(e.status(), e.what())
                                                  : Json(e.ToJson()));
    message = e.what();
  } catch (const Error& e) {
    res = HttpResponse{};
    SendError(res, 400, e.what(), "invalid_request_error", "", "", style);
    message = e.what();
  } catch (const std::exception& e) {
    res = HttpResponse{};
    SendError(res, 500, e.what(), "server_error", "", "", style);
    message = e.what();
  }
  LogFailedRequest(ctx, req, res, message);
}

}  // namespace

HttpServer::HttpServer(ServingContext& ctx) : ctx_(ctx) {
  const ServerConfig& c = ctx_.config;
  TransportLimits limits;
  limits.max_connections = c.max_connections;
  limits.backlog = c.backlog;
  limits.max_header_bytes = c.max_header_bytes;
  limits.max_header_count = c.max_header_count;
  limits.max_body_bytes = c.max_body_bytes;
  limits.header_timeout_s = c.header_timeout_s;
  limits.body_timeout_s = c.body_timeout_s;
  limits.keep_alive_timeout_s = c.keep_alive_timeout_s;
  limits.worker_threads = std::max<size_t>(c.http_threads, 4);
  transport_ = std::make_unique<HttpTransport>(
      limits,
      WithCors(c.cors,
               [this](const HttpRequest& req, HttpResponse& res) { return Route(req, res); }),
      TransportError);
}

HttpServer::~HttpServer() = default;

Handler HttpServer::Route(const HttpRequest& req, HttpResponse& res) {
  if (ctx_.abort_all.load() || draining_.load()) {
    SendError(res, 503, "the server is shutting down", "service_unavailable");
    return nullptr;
  }
  const std::string& m = req.method;
  const bool known_method = m == "GET" || m == "HEAD" || m == "POST";
  const std::vector<const RouteEntry*> routes = RoutesForPath(req.path);
  const RouteEntry* route = nullptr;
  std::string allow;
  for (const RouteEntry* r : routes) {
    const bool get = std::string_view(r->method) == "GET";
    if (m == r->method || (get && m == "HEAD")) route = r;
    allow += std::string(allow.empty() ? "" : ", ") + (get ? "GET, HEAD" : r->method);
  }
  const ErrorStyle style = routes.empty() ? ErrorStyle::kOpenAI : routes[0]->errors;
  auto not_allowed = [&] {
    res.SetHeader("Allow", routes.empty() ? "GET, HEAD, POST" : allow);
    SendError(res, 405, "method " + m + " not allowed on " + req.path, "invalid_request_error", "",
              "", style);
    return nullptr;
  };
  if (!known_method) return not_allowed();
  if (!ctx_.config.api_key.empty() && !IsPublicRoute(req.path)) {
    // OpenAI clients send `Authorization: Bearer <key>`, Anthropic clients `x-api-key: <key>`.
    const std::string auth = req.Header("Authorization");
    const std::string x_api_key = req.Header("x-api-key");
    if (!AuthorizationMatches(auth, ctx_.config.api_key) &&
        !ApiKeyHeaderMatches(x_api_key, ctx_.config.api_key)) {
      SendError(res, 401,
                auth.empty() && x_api_key.empty()
                    ? "missing API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'"
                    : "incorrect API key",
                "invalid_request_error", "", "invalid_api_key", style);
      return nullptr;
    }
  }
  if (routes.empty()) {
    SendError(res, 404, "no route " + m + " " + req.path, "not_found_error");
    return nullptr;
  }
  if (!route) return not_allowed();
  ServingContext& ctx = ctx_;
  auto fn = route->handler;
  Handler h = [&ctx, fn, style](const HttpRequest& rq, HttpResponse& rs) {
    Guarded(ctx, rq, rs, style, [&](const HttpRequest& q, HttpResponse& r) { fn(ctx, q, r); });
  };
  if (route->blocking) return h;
  h(req, res);
  return nullptr;
}

void HttpServer::Run() {
  const int bound = transport_->Listen(ctx_.config.host, ctx_.config.port);
  bound_port_ = bound;
  LogInfo("serving ", ctx_.config.served_model_name, " on http://", ctx_.config.host, ":", bound);
  transport_->Run();
}

void HttpServer::RequestShutdown() {
  draining_ = true;
  transport_->Shutdown(ctx_.config.drain_timeout_s, [this] { ctx_.abort_all = true; });
}

}  // namespace moeserve::server
