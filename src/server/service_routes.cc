// The routes that generate nothing: /v1/models, /tokenize, /detokenize and the probes.
#include "chat/chat_template.h"
#include "core/check.h"
#include "server/api_error.h"
#include "server/chat_request.h"
#include "server/request_parsing.h"
#include "server/route_table.h"
#include "server/routes.h"

#ifndef MOESERVE_VERSION
#error "MOESERVE_VERSION (CMake's PROJECT_VERSION) must be defined by the build"
#endif

namespace moeserve::server {
namespace {

void SendJson(HttpResponse& res, const Json& j) {
  res.SetContent(DumpJson(j), "application/json");
}

Json ModelCard(const ServingContext& ctx, const std::string& name) {
  return {{"id", name},
          {"object", "model"},
          {"created", ctx.created_unix_s},
          {"owned_by", "moeserve"},
          {"root", ctx.config.model_dir},
          {"parent", nullptr},
          {"max_model_len", ctx.engine.max_model_len()}};
}

}  // namespace

// Every name the model is served under (--served-model-name and its aliases).
void HandleModels(ServingContext& ctx, const HttpRequest&, HttpResponse& res) {
  Json data = Json::array({ModelCard(ctx, ctx.config.served_model_name)});
  for (const std::string& alias : ctx.config.served_model_aliases)
    data.push_back(ModelCard(ctx, alias));
  SendJson(res, {{"object", "list"}, {"data", std::move(data)}});
}

void HandleModel(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const std::string id = PathParameter(req);
  if (!ctx.config.ServesModel(id))
    throw ApiError(404, "The model `" + id + "` does not exist.", "NotFoundError", "model",
                   "model_not_found");
  SendJson(res, ModelCard(ctx, id));
}

void HandleTokenize(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const Json body = ParseBody(req.body);
  CheckModel(body, ctx);
  std::vector<int32_t> ids;
  if (auto p = GetString(body, "prompt")) {
    ids = ctx.tokenizer.Encode(*p, GetBool(body, "add_special_tokens").value_or(true));
  } else if (body.contains("messages")) {
    if (!ctx.chat_template) throw BadRequest("this model has no chat template");
    const Json messages = NormalizeMessages(body["messages"], ctx.config.limits);
    std::string prompt;
    try {
      prompt = chat::ApplyChatTemplate(
          *ctx.chat_template, messages, body.contains("tools") ? body["tools"] : Json(nullptr),
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

void HandleHealth(ServingContext&, const HttpRequest&, HttpResponse&) {}

void HandleVersion(ServingContext&, const HttpRequest&, HttpResponse& res) {
  SendJson(res, {{"version", MOESERVE_VERSION}});
}

void HandleMetrics(ServingContext& ctx, const HttpRequest&, HttpResponse& res) {
  res.SetContent(ctx.metrics.Render(ctx.engine.Stats(), ctx.config.served_model_name),
                 "text/plain; version=0.0.4");
}

}  // namespace moeserve::server
