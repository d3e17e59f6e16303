// A legacy completions request (/v1/completions), typed: its prompts tokenized, its sampling
// parameters and its response options.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/request_parsing.h"
#include "server/serving_context.h"
#include "server/structured_output.h"

namespace moeserve::server {

using Json = nlohmann::ordered_json;

struct CompletionPrompt {
  std::vector<int32_t> ids;
  std::string text;  // for echo
};

struct CompletionRequest {
  // A string, a list of strings, a list of token ids or a list of token-id lists; each prompt
  // becomes n choices (choice index = prompt index * n + sample).
  std::vector<CompletionPrompt> prompts;
  ParsedSampling sampling;  // max_tokens defaults to 16 (OpenAI)
  bool echo = false;
  int logprobs = -1;  // -1: none; else the number of top logprobs per token
  bool as_token_ids = false;
  bool stream = false, include_usage = false;
  // As sent (null when absent).
  Json response_format;
  // The constraint the text must follow (structured_output.h), compiled into sampling.params.
  ConstraintSpec constraint;
};

// Reads and checks a completions body (prompts are tokenized here); 400 naming the field.
CompletionRequest ParseCompletionRequest(const Json& body, const ServingContext& ctx);

}  // namespace moeserve::server
