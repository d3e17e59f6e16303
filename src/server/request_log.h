// The server's log of failed requests: one line per request a handler refused or failed, with a
// request id the client also gets (X-Request-Id, the client's own when it sent one, as vLLM's
// request ids), so a user's error report can be found in the log. Finished requests are logged by
// Metrics::RecordRequest (metrics.h).
#pragma once

#include <string>

#include "server/http_transport.h"
#include "server/serving_context.h"

namespace moeserve::server {

// "request req-12 POST /v1/chat/completions failed: 400 'messages' must be a list"
void LogFailedRequest(ServingContext& ctx, const HttpRequest& req, HttpResponse& res,
                      const std::string& message);

}  // namespace moeserve::server
