#include "server/api_error.h"

namespace moeserve::server {

nlohmann::json ErrorBody(int status, const std::string& message, const std::string& type,
                         const std::string& param, const std::string& code) {
  nlohmann::json e = {{"message", message}, {"type", type}};
  e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  e["code"] = code.empty() ? nlohmann::json(status) : nlohmann::json(code);
  return {{"error", e}};
}

nlohmann::json ApiError::ToJson() const {
  return ErrorBody(status_, what(), type_, param_, code_);
}

nlohmann::ordered_json AnthropicErrorBody(int status, const std::string& message) {
  const char* type = "api_error";
  switch (status) {
    case 400:
      type = "invalid_request_error";
      break;
    case 401:
      type = "authentication_error";
      break;
    case 403:
      type = "permission_error";
      break;
    case 404:
      type = "not_found_error";
      break;
    case 413:
      type = "request_too_large";
      break;
    case 429:
      type = "rate_limit_error";
      break;
    case 503:
      type = "overloaded_error";
      break;
    default:
      type = status >= 400 && status < 500 ? "invalid_request_error" : "api_error";
  }
  return nlohmann::ordered_json{{"type", "error"},
                                {"error", {{"type", type}, {"message", message}}}};
}

ApiError BadRequest(const std::string& message, const std::string& param) {
  return ApiError(400, message, "invalid_request_error", param);
}

}  // namespace moeserve::server
