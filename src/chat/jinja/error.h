// Template errors. Thrown as moeserve::Error (bad input at a boundary); the message names the line
// of the template that failed once the interpreter knows it.
#pragma once

#include <string>

#include "core/check.h"

namespace moeserve::chat::jinja {

class TemplateError : public moeserve::Error {
 public:
  explicit TemplateError(const std::string& message, int line = 0)
      : moeserve::Error(line > 0 ? "chat template line " + std::to_string(line) + ": " + message
                                 : "chat template: " + message),
        message_(message),
        line_(line) {}
  int line() const { return line_; }
  const std::string& message() const { return message_; }

 private:
  std::string message_;
  int line_;
};

template <typename... Args>
[[noreturn]] void Throw(const Args&... args) {
  throw TemplateError(moeserve::detail::Concat(args...));
}

}  // namespace moeserve::chat::jinja
