#include "server/cors.h"

#include <algorithm>
#include <memory>
#include <set>

namespace moeserve::server {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

bool Contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The configuration resolved once, as Starlette's middleware does in its constructor.
struct Policy {
  explicit Policy(const CorsConfig& c)
      : origins(c.allowed_origins), credentials(c.allow_credentials) {
    all_origins = Contains(origins, "*");
    all_headers = Contains(c.allowed_headers, "*");
    methods =
        Contains(c.allowed_methods, "*")
            ? std::vector<std::string>{"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"}
            : c.allowed_methods;
    // The CORS-safelisted request headers are always allowed.
    std::set<std::string> headers = {"accept", "accept-language", "content-language",
                                     "content-type"};
    for (const std::string& h : c.allowed_headers) headers.insert(Lower(h));
    allowed_headers.assign(headers.begin(), headers.end());
    explicit_origin = !all_origins || credentials;
  }

  bool OriginAllowed(const std::string& origin) const {
    return all_origins || Contains(origins, origin);
  }

  // 200 "OK" or 400 naming what is not allowed.
  void Preflight(const HttpRequest& req, HttpResponse& res) const {
    const std::string origin = req.Header("Origin");
    const std::string method = req.Header("Access-Control-Request-Method");
    const std::string requested = req.Header("Access-Control-Request-Headers");
    std::vector<std::string> failures;
    if (explicit_origin) {
      res.SetHeader("Vary", "Origin");
    } else {
      res.SetHeader("Access-Control-Allow-Origin", "*");
    }
    if (OriginAllowed(origin)) {
      if (explicit_origin) res.SetHeader("Access-Control-Allow-Origin", origin);
    } else {
      failures.push_back("origin");
    }
    std::string method_list;
    for (const std::string& m : methods) method_list += (method_list.empty() ? "" : ", ") + m;
    res.SetHeader("Access-Control-Allow-Methods", method_list);
    res.SetHeader("Access-Control-Max-Age", "600");
    if (!Contains(methods, method)) failures.push_back("method");
    if (all_headers) {
      if (!requested.empty()) res.SetHeader("Access-Control-Allow-Headers", requested);
    } else {
      std::string list;
      for (const std::string& h : allowed_headers) list += (list.empty() ? "" : ", ") + h;
      res.SetHeader("Access-Control-Allow-Headers", list);
      size_t start = 0;
      while (!requested.empty() && start <= requested.size()) {
        const size_t comma = std::min(requested.find(',', start), requested.size());
        const std::string h = Lower(Trim(requested.substr(start, comma - start)));
        if (!Contains(allowed_headers, h)) {
          failures.push_back("headers");
          break;
        }
        start = comma + 1;
      }
    }
    if (credentials) res.SetHeader("Access-Control-Allow-Credentials", "true");
    std::string text = "OK";
    if (!failures.empty()) {
      text = "Disallowed CORS ";
      for (size_t i = 0; i < failures.size(); ++i) text += (i ? ", " : "") + failures[i];
      res.status = 400;
    }
    res.SetContent(text, "text/plain; charset=utf-8");
  }

  // The fields of an actual (non-preflight) response to a request with an Origin.
  void Decorate(const std::string& origin, bool has_cookie, HttpResponse& res) const {
    if (all_origins && !(has_cookie || credentials)) {
      res.SetHeader("Access-Control-Allow-Origin", "*");
    } else if (OriginAllowed(origin)) {
      res.SetHeader("Access-Control-Allow-Origin", origin);
      res.SetHeader("Vary", "Origin");
    }
    if (credentials) res.SetHeader("Access-Control-Allow-Credentials", "true");
  }

  std::vector<std::string> origins, methods, allowed_headers;
  bool credentials, all_origins, all_headers, explicit_origin;
};

}  // namespace

Router WithCors(const CorsConfig& config, Router inner) {
  auto policy = std::make_shared<const Policy>(config);
  return [policy, inner = std::move(inner)](const HttpRequest& req, HttpResponse& res) -> Handler {
    const std::string origin = req.Header("Origin");
    if (origin.empty()) return inner(req, res);
    if (req.method == "OPTIONS" && !req.Header("Access-Control-Request-Method").empty()) {
      policy->Preflight(req, res);
      return nullptr;
    }
    const bool has_cookie = !req.Header("Cookie").empty();
    Handler h = inner(req, res);
    if (!h) {
      policy->Decorate(origin, has_cookie, res);
      return nullptr;
    }
    return [policy, h = std::move(h), origin, has_cookie](const HttpRequest& rq, HttpResponse& rs) {
      h(rq, rs);
      policy->Decorate(origin, has_cookie, rs);
    };
  };
}

}  // namespace moeserve::server
