// The OpenAI Responses API request (POST /v1/responses) mapped onto the chat path.
//
//   instructions                        -> a leading system message (not inherited by follow-ups)
//   input: a string                     -> one user message
//   input items: message (user / system / developer / assistant; input_text / output_text parts)
//                reasoning (reasoning_text content, else summary text)
//                                       -> the next assistant message's reasoning_content
//                function_call          -> tool_calls of the assistant message
//                function_call_output   -> a `tool` message
//   previous_response_id                -> the stored conversation (response_store.h) before input
//   tools [{type: "function", name, description, parameters}] -> OpenAI chat function tools
//   tool_choice auto / none / required / {type: "function", name} -> the chat tool_choice
//                                       (required and named constrain the reply to tool calls
//                                       with valid arguments, as chat completions does)
//   parallel_tool_calls                 -> the same (false: exactly one call)
//   max_output_tokens, temperature, top_p -> sampling
//   text.format json_schema / json_object -> ChatRequest::response_format (structured outputs)
// Hosted tools (web_search, file_search, ...), images and files are refused (400).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/chat_request.h"
#include "server/serving_context.h"

namespace moeserve::server {

struct ResponsesRequest {
  ChatRequest chat;
  Json conversation = Json::array();  // chat.messages without the instructions
  bool store = true;
  std::optional<std::string> previous_response_id;
  // Echoed in the response object as sent (null when absent).
  Json instructions, tools, tool_choice, max_output_tokens, temperature, top_p, metadata, text,
      reasoning;
};

ResponsesRequest ParseResponsesRequest(const Json& body, ServingContext& ctx);

}  // namespace moeserve::server
