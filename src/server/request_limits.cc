#include "server/request_limits.h"

#include <string>

namespace moeserve::server {

void CheckLimit(size_t value, size_t limit, std::string_view what, std::string_view flag,
                std::string_view param) {
  if (value <= limit) return;
  throw ApiError(400,
                 std::string(what) + " (" + std::to_string(value) + ") is more than the limit of " +
                     std::to_string(limit) + " (--" + std::string(flag) + ")",
                 "invalid_request_error", std::string(param), "request_limit_exceeded");
}

bool IsReservedTemplateVariable(std::string_view name) {
  // Set by ApplyChatTemplate and the chat route (chat/chat_template.cc, chat_completions.cc),
  // HF apply_chat_template's own arguments, and the interpreter's globals (jinja/builtins.cc).
  static constexpr std::string_view kReserved[] = {
      // what the renderer sets
      "messages", "tools", "documents", "add_generation_prompt", "continue_final_message",
      "bos_token", "eos_token", "chat_template", "tokenize",
      // interpreter globals
      "raise_exception", "range", "namespace", "dict", "strftime_now", "true", "false", "none",
      "True", "False", "None",  //
  };
  for (std::string_view r : kReserved)
    if (name == r) return true;
  return false;
}

}  // namespace moeserve::server
