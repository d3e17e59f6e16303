// Cross-origin resource sharing as `vllm serve` has it (FastAPI's CORSMiddleware with
// --allowed-origins / --allowed-methods / --allowed-headers / --allow-credentials, each list
// defaulting to ["*"]): a preflight (OPTIONS with Origin and Access-Control-Request-Method) is
// answered here, 200 "OK" or 400 "Disallowed CORS origin, method, headers", before routing and
// without an API key; every other request with an Origin gets the Access-Control-Allow-* fields
// on its response.
#pragma once

#include <string>
#include <vector>

#include "server/http_transport.h"

namespace moeserve::server {

struct CorsConfig {
  std::vector<std::string> allowed_origins{"*"};
  std::vector<std::string> allowed_methods{"*"};
  std::vector<std::string> allowed_headers{"*"};
  bool allow_credentials = false;
};

// Wraps a router: answers preflights itself, adds the CORS fields to what `inner` (or the
// handler it returns) answers.
Router WithCors(const CorsConfig& config, Router inner);

}  // namespace moeserve::server
