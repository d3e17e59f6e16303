// A chat request, typed: what /v1/chat/completions reads from its body, and what the Anthropic
// Messages and OpenAI Responses routes build from theirs, so every chat route shares prompt
// rendering (chat_prompt.h), reply parsing (chat_replies.h) and the engine path.
//
// tool_choice (as vLLM's structured outputs for tools):
//  - "auto" (default with tools): tools are rendered, calls in the reply are parsed; unconstrained.
//  - "none": tools are still rendered (vLLM's default) but the reply is not parsed for calls.
//  - "required": the reply is constrained to one or more tool calls in the model's syntax with
//    arguments typed by each tool's schema (tool_call_grammar.h); exactly one call when
//    parallel_tool_calls is false.
//  - {"type": "function", "function": {"name": f}}: constrained to exactly one call of f (f must
//    be one of `tools`, else 400).
//  - parallel_tool_calls false with "auto": only the first call of a reply is returned.
// Response-format constraints (structured_output.h) are read into `constraint`; a tool_choice
// that constrains the reply and another constraint in one request is a 400.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "server/request_parsing.h"
#include "server/serving_context.h"
#include "server/structured_output.h"

namespace moeserve::server {

using Json = nlohmann::ordered_json;

struct ToolChoice {
  enum class Mode { kNone, kAuto, kRequired, kNamed };
  Mode mode = Mode::kNone;
  std::string function;  // kNamed: the only function whose calls are returned
};

struct LogprobOptions {
  bool enabled = false;       // logprobs: true
  int num_top = 0;            // top_logprobs
  bool as_token_ids = false;  // return_tokens_as_token_ids
};

struct ChatRequest {
  // OpenAI messages normalized for the template: content parts joined into strings, tool-call
  // arguments parsed into objects.
  Json messages = Json::array();
  Json tools;  // null, or a non-empty list of {"type": "function", "function": {name, ...}}
  ToolChoice tool_choice;
  bool parse_tool_calls = false;  // tools, a tool_choice other than none, and a parser
  bool parallel_tool_calls = true;
  // As sent (null when absent). Structured outputs (issue 12) compile it into a constraint.
  Json response_format;
  // The grammar the reply must follow (none, a response format, or the tool calls above);
  // compiled when the generation starts (chat_replies.h).
  ConstraintSpec constraint;
  ParsedSampling sampling;  // max_tokens unset = the rest of the context
  LogprobOptions logprobs;
  bool stream = false, include_usage = false;
  bool add_generation_prompt = true, continue_final_message = false;
  Json template_kwargs = Json::object();  // chat_template_kwargs
  // vLLM's echo: the reply starts with the final message's content when that message is the
  // assistant's (a continued reply).
  bool echo = false;
};

// Reads and checks an OpenAI chat completion body; 400 naming the field on bad input.
ChatRequest ParseChatRequest(const Json& body, const ServingContext& ctx);

// The pieces ParseChatRequest is made of, for routes that build a ChatRequest from another API.
// OpenAI messages -> the template's form (see ChatRequest::messages); checks the count limit.
// An assistant message's `reasoning` (current vLLM's name) becomes `reasoning_content` (the
// templates' name) unless that is set too.
Json NormalizeMessages(const Json& messages, const RequestLimits& limits);
// Checks `tools` (OpenAI function tools) against the limits and sets tools, tool_choice and
// parse_tool_calls; `tool_choice` is the request's (null when absent).
void SetTools(ChatRequest& r, const Json& tools, const Json& tool_choice,
              const ServingContext& ctx);
// Sets `constraint` to the tool calls a tool_choice "required" or named function demands (see
// above; exactly one call when named or when parallel_tool_calls is false); nothing for the other
// modes. A constraint already set (a response format) is a 400 naming its field. Every chat route
// calls it once tools, tool_choice and parallel_tool_calls are read.
void ConstrainToolCalls(ChatRequest& r, const ServingContext& ctx);

}  // namespace moeserve::server
