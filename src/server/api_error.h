// Errors that become OpenAI-style error responses:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}} with an HTTP 4xx/5xx
//   status.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace moeserve::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string type, std::string param = "",
           std::string code = "")
      : std::runtime_error(message),
        status_(status),
        type_(std::move(type)),
        param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  nlohmann::json ToJson() const;

 private:
  int status_;
  std::string type_, param_, code_;
};

// 400 invalid_request_error naming the offending field.
ApiError BadRequest(const std::string& message, const std::string& param = "");

// The JSON body of an error response.
// Serializes a response; invalid UTF-8 (e.g. echoed from a bad request) becomes U+FFFD instead
// of throwing.
template <typename J>
std::string DumpJson(const J& j) {
  return j.dump(-1, ' ', false, J::error_handler_t::replace);
}

nlohmann::json ErrorBody(int status, const std::string& message, const std::string& type,
                         const std::string& param = "", const std::string& code = "");

// The Anthropic Messages API's error body, its type chosen by the status as Anthropic does:
//   {"type": "error", "error": {"type": "invalid_request_error", "message": ...}}
nlohmann::ordered_json AnthropicErrorBody(int status, const std::string& message);

// Which error body a route answers with.
enum class ErrorStyle { kOpenAI, kAnthropic };

}  // namespace moeserve::server
