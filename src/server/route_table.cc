#include "server/route_table.h"

#include "server/routes.h"

namespace moeserve::server {
namespace {

constexpr std::string_view kParameter = "/{id}";

const RouteEntry kRoutes[] = {
    // method  path                   blocking public handler
    {"POST", "/v1/completions", true, false, HandleCompletions},
    {"POST", "/v1/chat/completions", true, false, HandleChatCompletions},
    {"GET", "/v1/models", false, false, HandleModels},
    {"GET", "/v1/models/{id}", false, false, HandleModel},
    {"POST", "/v1/responses", true, false, HandleResponses},
    {"GET", "/v1/responses/{id}", false, false, HandleGetResponse},
    {"POST", "/v1/messages", true, false, HandleMessages, ErrorStyle::kAnthropic},
    {"POST", "/v1/messages/count_tokens", true, false, HandleCountTokens, ErrorStyle::kAnthropic},
    {"POST", "/tokenize", true, false, HandleTokenize},
    {"POST", "/detokenize", true, false, HandleDetokenize},
    {"GET", "/health", false, true, HandleHealth},
    {"GET", "/version", false, true, HandleVersion},
    {"GET", "/metrics", true, true, HandleMetrics},
};

bool Matches(std::string_view pattern, std::string_view path) {
  if (!pattern.ends_with(kParameter)) return pattern == path;
  pattern.remove_suffix(kParameter.size() - 1);  // keep the '/'
  if (!path.starts_with(pattern)) return false;
  return path.size() > pattern.size();
}

// %XX escapes -> bytes (clients escape '/' in model ids); malformed escapes stay as they are.
std::string PercentDecode(std::string_view s) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

std::vector<const RouteEntry*> RoutesForPath(std::string_view path) {
  std::vector<const RouteEntry*> out;
  for (const RouteEntry& r : kRoutes)
    if (Matches(r.path, path)) out.push_back(&r);
  return out;
}

bool IsPublicRoute(std::string_view path) {
  for (const RouteEntry* r : RoutesForPath(path))
    if (r->is_public) return true;
  return false;
}

std::string PathParameter(const HttpRequest& req) {
  for (const RouteEntry* r : RoutesForPath(req.path)) {
    const std::string_view pattern = r->path;
    if (pattern.ends_with(kParameter))
      return PercentDecode(
          std::string_view(req.path).substr(pattern.size() - kParameter.size() + 1));
  }
  return "";
}

}  // namespace moeserve::server
