#include "server/request_log.h"

#include "core/log.h"

namespace moeserve::server {

void LogFailedRequest(ServingContext& ctx, const HttpRequest& req, HttpResponse& res,
                      const std::string& message) {
  std::string id = req.Header("X-Request-Id");
  if (id.empty() || id.size() > 128) id = "req-" + std::to_string(ctx.next_request_id.fetch_add(1));
  res.SetHeader("X-Request-Id", id);
  if (res.status >= 500)
    LogError("request ", id, " ", req.method, " ", req.path, " failed: ", res.status, " ", message);
  else
    LogWarn("request ", id, " ", req.method, " ", req.path, " failed: ", res.status, " ", message);
}

}  // namespace moeserve::server
