// JSON request body -> typed values, with the type and range checks the OpenAI API and vLLM make.
// Every failure is an ApiError naming the field (400), so bad input never reaches the engine.
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampling_params.h"
#include "server/generation.h"
#include "server/serving_context.h"

namespace moeserve::server {

using Json = nlohmann::ordered_json;

// Parses a request body; malformed JSON (including invalid UTF-8) or a non-object -> 400.
Json ParseBody(const std::string& body);

// Field readers: nullopt when absent or null; 400 when of the wrong type.
std::optional<bool> GetBool(const Json& body, const char* name);
std::optional<int64_t> GetInt(const Json& body, const char* name);  // integral numbers only
std::optional<double> GetNumber(const Json& body, const char* name);
std::optional<std::string> GetString(const Json& body, const char* name);

// 404 model_not_found unless `model` is absent or the served model name.
void CheckModel(const Json& body, const ServingContext& ctx);

struct ParsedSampling {
  engine::SamplingParams params;
  TextOptions text;
  std::optional<int> max_tokens;  // as sent (max_tokens, or max_completion_tokens for chat)
  // vLLM's truncate_prompt_tokens: keep only the last k prompt tokens (-1 sent = max_model_len).
  std::optional<size_t> truncate_prompt_tokens;
  int prompt_logprobs = -1;  // as asked (params.prompt_logprobs may be more: completions' echo)
};

// The sampling fields both routes share (temperature ... logit_bias, stop, n, max_tokens and vLLM's
// extras: allowed_token_ids and single-token bad_words become logit biases of -100, priority must
// be 0, prompt_logprobs, truncate_prompt_tokens). Request-specific fields (logprobs, echo, ...)
// are read by the routes. Omitted temperature / top_p / top_k take the model's
// generation_config.json defaults.
ParsedSampling ParseSampling(const Json& body, const ServingContext& ctx, bool chat);
// The body fields ParseSampling reads (for LogIgnoredFields).
extern const std::initializer_list<std::string_view> kSamplingFields;

// Keeps the last `keep` tokens of `ids` when it is longer (truncate_prompt_tokens).
void TruncatePrompt(std::vector<int32_t>& ids, std::optional<size_t> keep);

// Logs one warning naming the body's fields that are in none of `used` plus `also_ignored`
// (fields present whose values the server does not honour), as vLLM logs the fields it ignores.
void LogIgnoredFields(const char* route, const Json& body,
                      std::initializer_list<std::initializer_list<std::string_view>> used,
                      const std::vector<std::string>& also_ignored = {});

// 400 (the context-length error) when a text of `bytes` bytes is certainly longer than
// max_model_len tokens (ctx.max_bytes_per_token), so the tokenizer need not run on it.
void CheckPromptBytes(size_t bytes, const ServingContext& ctx, const char* param);

// Checks `max_tokens` (when given) is >= 1 and the params are in range for the engine's vocab.
void ValidateSampling(const engine::SamplingParams& params, const ServingContext& ctx);

}  // namespace moeserve::server
