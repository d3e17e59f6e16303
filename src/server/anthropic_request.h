// The Anthropic Messages API request (POST /v1/messages, /v1/messages/count_tokens) mapped onto
// the chat path: a ChatRequest rendered by the model's own chat template.
//
//   system (string or text blocks)        -> a leading system message
//   user text blocks                      -> user message content (joined by "\n")
//   user tool_result blocks               -> `tool` messages (before the user's text, in order)
//   assistant thinking blocks             -> reasoning_content (interleaved thinking survives the
//                                            round trip; the signature is not checked)
//   assistant text / tool_use blocks      -> content / tool_calls
//   tools [{name, description, input_schema}] -> OpenAI function tools
//   tool_choice auto / any / tool / none  -> auto / required / named / none; any and tool
//                                            constrain the reply to tool calls with valid
//                                            arguments, as chat completions does (chat_request.h)
//   disable_parallel_tool_use             -> parallel_tool_calls: false (then exactly one call)
//   max_tokens (required), stop_sequences, temperature, top_p, top_k -> sampling
//   thinking {type: "disabled"}           -> chat_template_kwargs enable_thinking: false
//   metadata                              -> accepted, not used
// Image and document blocks, and server tools, are refused (400).
#pragma once

#include <nlohmann/json.hpp>

#include "server/chat_request.h"
#include "server/serving_context.h"

namespace moeserve::server {

// `count_only`: /v1/messages/count_tokens (max_tokens not required, no sampling).
ChatRequest ParseAnthropicRequest(const Json& body, const ServingContext& ctx, bool count_only);

}  // namespace moeserve::server
