#include "server/http_server.h"

#include <httplib.h>

#include <thread>

#include "core/check.h"
#include "core/log.h"
#include "server/api_error.h"
#include "server/api_key.h"
#include "server/routes.h"

namespace moeserve::server {
namespace {

void SendError(httplib::Response& res, int status, const std::string& message,
               const std::string& type, const std::string& param = "",
               const std::string& code = "") {
  res.status = status;
  res.set_content(DumpJson(ErrorBody(status, message, type, param, code)), "application/json");
}

void SendJson(httplib::Response& res, const Json& j) {
  res.set_content(DumpJson(j), "application/json");
}

struct RouteInfo {
  const char* method;
  const char* path;
};
constexpr RouteInfo kRoutes[] = {{"POST", "/v1/completions"}, {"POST", "/v1/chat/completions"},
                                 {"GET", "/v1/models"},       {"GET", "/health"},
                                 {"GET", "/metrics"},         {"GET", "/version"},
                                 {"POST", "/tokenize"},       {"POST", "/detokenize"}};

void Tokenize(ServingContext& ctx, const httplib::Request& req, httplib::Response& res) {
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

void Detokenize(ServingContext& ctx, const httplib::Request& req, httplib::Response& res) {
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

}  // namespace

HttpServer::HttpServer(ServingContext& ctx)
    : ctx_(ctx), http_(std::make_unique<httplib::Server>()) {
  Register();
}

HttpServer::~HttpServer() = default;

void HttpServer::Register() {
  httplib::Server& s = *http_;
  const size_t threads = std::max<size_t>(ctx_.config.http_threads, 4);
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.set_payload_max_length(ctx_.config.max_body_bytes);
  s.set_keep_alive_max_count(1000);

  // Wraps a handler: counts it for the drain, maps exceptions to error responses.
  auto wrap = [this](auto fn) {
    return [this, fn](const httplib::Request& req, httplib::Response& res) {
      ++active_requests_;
      try {
        fn(req, res);
      } catch (const ApiError& e) {
        res.status = e.status();
        SendJson(res, e.ToJson());
      } catch (const Error& e) {
        SendError(res, 400, e.what(), "invalid_request_error");
      } catch (const std::exception& e) {
        LogWarn("request ", req.method, " ", req.path, " failed: ", e.what());
        SendError(res, 500, e.what(), "server_error");
      }
      --active_requests_;
    };
  };

  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (ctx_.abort_all.load() || draining_.load()) {
      SendError(res, 503, "the server is shutting down", "service_unavailable");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!ctx_.config.api_key.empty() && !IsPublicRoute(req.path)) {
      const std::string auth = req.get_header_value("Authorization");
      if (!AuthorizationMatches(auth, ctx_.config.api_key)) {
        SendError(res, 401,
                  auth.empty() ? "missing API key: send 'Authorization: Bearer <key>'"
                               : "incorrect API key",
                  "invalid_request_error", "", "invalid_api_key");
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  s.Post("/v1/completions",
         wrap([this](const auto& req, auto& res) { HandleCompletions(ctx_, req, res); }));
  s.Post("/v1/chat/completions",
         wrap([this](const auto& req, auto& res) { HandleChatCompletions(ctx_, req, res); }));
  s.Post("/tokenize", wrap([this](const auto& req, auto& res) { Tokenize(ctx_, req, res); }));
  s.Post("/detokenize", wrap([this](const auto& req, auto& res) { Detokenize(ctx_, req, res); }));
  s.Get("/v1/models", wrap([this](const auto&, auto& res) {
          Json model = {{"id", ctx_.config.served_model_name},
                        {"object", "model"},
                        {"created", ctx_.created_unix_s},
                        {"owned_by", "moeserve"},
                        {"root", ctx_.config.model_dir},
                        {"parent", nullptr},
                        {"max_model_len", ctx_.engine.max_model_len()}};
          SendJson(res, {{"object", "list"}, {"data", Json::array({model})}});
        }));
  s.Get("/health", [](const auto&, auto& res) { res.status = 200; });
  s.Get("/version", [](const auto&, auto& res) { SendJson(res, {{"version", "0.1.0"}}); });
  s.Get("/metrics", wrap([this](const auto&, auto& res) {
          res.set_content(ctx_.metrics.Render(ctx_.engine.Stats(), ctx_.config.served_model_name),
                          "text/plain; version=0.0.4");
        }));

  // Routing misses and httplib's own errors (413) get OpenAI error bodies; a known path with
  // the wrong method is 405.
  s.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        if (res.status == 404) {
          for (const RouteInfo& r : kRoutes) {
            if (req.path == r.path) {
              res.set_header("Allow", r.method);
              SendError(res, 405, "method " + req.method + " not allowed on " + req.path,
                        "invalid_request_error");
              return httplib::Server::HandlerResponse::Handled;
            }
          }
          SendError(res, 404, "no route " + req.method + " " + req.path, "not_found_error");
        } else if (res.status == 413) {
          SendError(res, 413, "the request body is larger than the limit", "invalid_request_error",
                    "", "request_too_large");
        } else {
          SendError(res, res.status, "HTTP error " + std::to_string(res.status),
                    res.status >= 500 ? "server_error" : "invalid_request_error");
        }
        return httplib::Server::HandlerResponse::Handled;
      }));
}

void HttpServer::Run() {
  const int port = ctx_.config.port;
  int bound = port;
  if (port == 0) {
    bound = http_->bind_to_any_port(ctx_.config.host);
  } else if (!http_->bind_to_port(ctx_.config.host, port)) {
    bound = -1;
  }
  if (bound < 0) Fail("cannot listen on ", ctx_.config.host, ":", port);
  bound_port_ = bound;
  LogInfo("serving ", ctx_.config.served_model_name, " on http://", ctx_.config.host, ":", bound);
  http_->listen_after_bind();
}

void HttpServer::RequestShutdown() {
  draining_ = true;
  // Closing the listening socket makes listen_after_bind return once the pool threads finish;
  // connections already accepted keep being served until their requests end.
  http_->stop();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(ctx_.config.drain_timeout_s);
  while (active_requests_.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (active_requests_.load() > 0) {
    LogWarn("drain timeout: aborting ", active_requests_.load(), " running requests");
    ctx_.abort_all = true;
  }
}

}  // namespace moeserve::server
