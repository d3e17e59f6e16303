// The one table of routes: method, path, whether the handler waits on the engine (it then runs on
// the worker pool), whether it is public (served without the API key: api_key.h's policy), the
// handler, and the shape of its error bodies (OpenAI's, or Anthropic's for /v1/messages). A path
// ending in "/{id}" matches one more non-empty path segment, which the handler reads with
// PathParameter.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/api_error.h"
#include "server/http_transport.h"
#include "server/serving_context.h"

namespace moeserve::server {

struct RouteEntry {
  const char* method;  // GET routes answer HEAD too
  const char* path;
  bool blocking;
  bool is_public;
  void (*handler)(ServingContext&, const HttpRequest&, HttpResponse&);
  ErrorStyle errors = ErrorStyle::kOpenAI;  // the shape of its error bodies
};

// Every route whose path matches `path` (several when methods differ); empty: 404.
std::vector<const RouteEntry*> RoutesForPath(std::string_view path);
// True when `path` may be served without the API key (/health, /metrics, /version).
bool IsPublicRoute(std::string_view path);
// The "{id}" segment of a request path matched by such a route ("" when none).
std::string PathParameter(const HttpRequest& req);

}  // namespace moeserve::server
