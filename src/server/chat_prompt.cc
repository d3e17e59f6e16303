#include "server/chat_prompt.h"

#include "chat/chat_template.h"
#include "core/check.h"
#include "server/api_error.h"

namespace moeserve::server {

ChatPrompt RenderChatPrompt(ChatRequest& request, const ServingContext& ctx) {
  if (!ctx.chat_template)
    throw BadRequest("this model has no chat template; start the server with --chat-template");
  Json extra = {{"bos_token", ctx.bos_token}, {"eos_token", ctx.eos_token}};
  for (const auto& [k, v] : request.template_kwargs.items()) extra[k] = v;
  ChatPrompt p;
  try {
    p.text = chat::ApplyChatTemplate(*ctx.chat_template, request.messages, request.tools,
                                     request.add_generation_prompt, extra);
  } catch (const Error& e) {
    throw BadRequest(std::string("chat template: ") + e.what(), "messages");
  }
  CheckPromptBytes(p.text.size(), ctx, "messages");
  if (request.continue_final_message) {
    // Cut what the template appended after the final message (end-of-turn tokens).
    const Json& last = request.messages.back();
    const std::string content = last.value("content", Json("")).is_string()
                                    ? last["content"].get<std::string>()
                                    : std::string();
    const size_t pos = content.empty() ? std::string::npos : p.text.rfind(content);
    if (pos != std::string::npos) p.text.resize(pos + content.size());
  }
  p.ids = ctx.tokenizer.Encode(p.text, /*add_special_tokens=*/false);
  TruncatePrompt(p.ids, request.sampling.truncate_prompt_tokens);
  if (p.ids.empty()) throw BadRequest("the rendered prompt is empty", "messages");
  const size_t max_len = ctx.engine.max_model_len();
  if (p.ids.size() >= max_len)
    throw BadRequest("This model's maximum context length is " + std::to_string(max_len) +
                         " tokens. However, your messages resulted in " +
                         std::to_string(p.ids.size()) + " tokens.",
                     "messages");
  ParsedSampling& ps = request.sampling;
  ps.params.max_tokens = ps.max_tokens.value_or(static_cast<int>(max_len - p.ids.size()));
  ValidateSampling(ps.params, ctx);
  return p;
}

}  // namespace moeserve::server
