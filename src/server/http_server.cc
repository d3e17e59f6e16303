#include "server/http_server.h"

#include <functional>
#include <string_view>

#include "core/check.h"
#include "core/log.h"
#include "server/api_error.h"
#include "server/api_key.h"
#include "server/routes.h"

namespace moeserve::server {
namespace {

void SendError(HttpResponse& res, int status, const std::string& message, const std::string& type,
               const std::string& param = "", const std::string& code = "") {
  res.status = status;
  res.SetContent(DumpJson(ErrorBody(status, message, type, param, code)), "application/json");
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

}  // namespace

void HandleTokenize(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const Json body = ParseBody(req.body);
  CheckModel(body, ctx);
  std::vector<int32_t> ids;
  if (auto p = GetString(body, "prompt")) {
    ids = ctx.tokenizer.Encode(*p, GetBool(body, "add_special_tokens").value_or(true));
  } else if (body.contains("messages")) {
    if (!ctx.chat_template) throw BadRequest("this model has no chat template");
    const Json& m = body["messages"];
    if (!m.is_array()) throw BadRequest("'messages' must be a list", "messages");
    CheckLimit(m.size(), ctx.config.limits.max_messages, "the number of messages",
               "max-messages-per-request", "messages");
    std::string prompt;
    try {
      prompt =
          chat::ApplyChatTemplate(*ctx.chat_template, chat::ParseToolCallArguments(m),
                                  body.contains("tools") ? body["tools"] : Json(nullptr),
                                  GetBool(body, "add_generation_prompt").value_or(true),
                                  {{"bos_token", ctx.bos_token}, {"eos_token", ctx.eos_token}});
    } catch (const Error& e) {
      throw BadRequest(std::string("chat template: ") + e.what(), "messages");
    }
    ids = ctx.tokenizer.Encode(prompt, GetBool(body, "add_special_tokens").value_or(false));
  } else {
    throw BadRequest("'prompt' or 'messages' is required", "prompt");
  }
  SendJson(res,
           {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", ctx.engine.max_model_len()}});
}

void HandleDetokenize(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const Json body = ParseBody(req.body);
  CheckModel(body, ctx);
  auto t = body.find("tokens");
  if (t == body.end() || !t->is_array()) throw BadRequest("'tokens' must be a list", "tokens");
  std::vector<int32_t> ids;
  for (const Json& v : *t) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
        static_cast<uint64_t>(v.get<int64_t>()) >= ctx.engine.vocab_size())
      throw BadRequest("'tokens' must hold token ids of the vocabulary", "tokens");
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  SendJson(res, {{"prompt", ctx.tokenizer.Decode(ids, false)}});
}

namespace {

// Runs a handler, turning its exceptions into error responses.
void Guarded(const HttpRequest& req, HttpResponse& res,
             const std::function<void(const HttpRequest&, HttpResponse&)>& fn) {
  try {
    fn(req, res);
  } catch (const ApiError& e) {
    res = HttpResponse{};
    res.status = e.status();
    SendJson(res, e.ToJson());
  } catch (const Error& e) {
    res = HttpResponse{};
    SendError(res, 400, e.what(), "invalid_request_error");
  } catch (const std::exception& e) {
    LogWarn("request ", req.method, " ", req.path, " failed: ", e.what());
    res = HttpResponse{};
    SendError(res, 500, e.what(), "server_error");
  }
}

struct RouteEntry {
  const char* method;  // GET routes answer HEAD too
  const char* path;
  bool blocking;  // waits on the engine: runs on the worker pool
  void (*fn)(ServingContext&, const HttpRequest&, HttpResponse&);
};

void Models(ServingContext& ctx, const HttpRequest&, HttpResponse& res) {
  Json model = {{"id", ctx.config.served_model_name},
                {"object", "model"},
                {"created", ctx.created_unix_s},
                {"owned_by", "moeserve"},
                {"root", ctx.config.model_dir},
                {"parent", nullptr},
                {"max_model_len", ctx.engine.max_model_len()}};
  SendJson(res, {{"object", "list"}, {"data", Json::array({model})}});
}

const RouteEntry kRoutes[] = {
    {"POST", "/v1/completions", true, HandleCompletions},
    {"POST", "/v1/chat/completions", true, HandleChatCompletions},
    {"POST", "/tokenize", true, HandleTokenize},
    {"POST", "/detokenize", true, HandleDetokenize},
    {"GET", "/v1/models", false, Models},
    {"GET", "/health", false, [](ServingContext&, const HttpRequest&, HttpResponse& res) {}},
    {"GET", "/version", false,
     [](ServingContext&, const HttpRequest&, HttpResponse& res) {
       SendJson(res, {{"version", "0.1.0"}});
     }},
    {"GET", "/metrics", true,
     [](ServingContext& ctx, const HttpRequest&, HttpResponse& res) {
       res.SetContent(ctx.metrics.Render(ctx.engine.Stats(), ctx.config.served_model_name),
                      "text/plain; version=0.0.4");
     }},
};

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
      limits, [this](const HttpRequest& req, HttpResponse& res) { return Route(req, res); },
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
  const RouteEntry* route = nullptr;
  for (const RouteEntry& r : kRoutes)
    if (req.path == r.path) route = &r;
  const bool get_route = route && std::string_view(route->method) == "GET";
  auto not_allowed = [&] {
    res.SetHeader("Allow", !route ? "GET, HEAD, POST" : get_route ? "GET, HEAD" : "POST");
    SendError(res, 405, "method " + m + " not allowed on " + req.path, "invalid_request_error");
    return nullptr;
  };
  if (!known_method) return not_allowed();
  if (!ctx_.config.api_key.empty() && !IsPublicRoute(req.path)) {
    const std::string auth = req.Header("Authorization");
    if (!AuthorizationMatches(auth, ctx_.config.api_key)) {
      SendError(res, 401,
                auth.empty() ? "missing API key: send 'Authorization: Bearer <key>'"
                             : "incorrect API key",
                "invalid_request_error", "", "invalid_api_key");
      return nullptr;
    }
  }
  if (!route) {
    SendError(res, 404, "no route " + m + " " + req.path, "not_found_error");
    return nullptr;
  }
  if (m != route->method && !(get_route && m == "HEAD")) return not_allowed();
  ServingContext& ctx = ctx_;
  auto fn = route->fn;
  Handler h = [&ctx, fn](const HttpRequest& rq, HttpResponse& rs) {
    Guarded(rq, rs, [&](const HttpRequest& q, HttpResponse& r) { fn(ctx, q, r); });
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
