// Chat prompt rendering: a ChatRequest through the model's chat template into prompt text and
// token ids, with the context-length check and the default max_tokens (the rest of the context).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "server/chat_request.h"
#include "server/serving_context.h"

namespace moeserve::server {

struct ChatPrompt {
  std::string text;
  std::vector<int32_t> ids;
};

// Renders `request` (400 when the model has no template, the template fails, or the prompt does
// not fit the context), then sets request.sampling.params.max_tokens and validates the sampling
// parameters against the engine.
ChatPrompt RenderChatPrompt(ChatRequest& request, const ServingContext& ctx);

}  // namespace moeserve::server
