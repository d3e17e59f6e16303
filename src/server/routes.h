// The route handlers. Each parses its body into a typed request, does the work and fills the
// response; bad input throws ApiError (http_server.cc turns it into the error body). Which method
// and path reach which handler is route_table.cc's one table.
#pragma once

#include "server/http_transport.h"
#include "server/serving_context.h"

namespace moeserve::server {

// OpenAI
void HandleCompletions(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);
void HandleChatCompletions(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);
void HandleModels(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);
void HandleModel(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);  // /{id}
void HandleResponses(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);
void HandleGetResponse(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);  // /{id}
// Anthropic (anthropic_messages.cc)
void HandleMessages(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);
void HandleCountTokens(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);
// vLLM
void HandleTokenize(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);
void HandleDetokenize(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);
// Probes
void HandleHealth(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);
void HandleVersion(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);
void HandleMetrics(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);

}  // namespace moeserve::server
