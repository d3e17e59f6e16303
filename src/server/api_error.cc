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

ApiError BadRequest(const std::string& message, const std::string& param) {
  return ApiError(400, message, "invalid_request_error", param);
}

}  // namespace moeserve::server
