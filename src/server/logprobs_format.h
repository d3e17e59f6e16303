// Engine logprobs -> the two OpenAI response shapes.
//  - legacy completions: {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}
//  - chat: {content: [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}
// A token's text is its own decoding (partial UTF-8 becomes U+FFFD, as in vLLM); -inf logprobs
// become -9999.0 (JSON has no infinity; vLLM does the same).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "engine/engine_interface.h"
#include "tokenizer/tokenizer.h"

namespace moeserve::server {

using Json = nlohmann::ordered_json;

class CompletionLogprobs {
 public:
  // as_ids: token strings are "token_id:N" (vLLM's return_tokens_as_token_ids).
  CompletionLogprobs(const tokenizer::Tokenizer& tok, int num_top, bool as_ids)
      : tok_(tok), num_top_(num_top), as_ids_(as_ids) {}
  // Appends entries; `lp` null for the first prompt token (no logprob).
  void Add(const std::optional<engine::TokenLogprobs>& lp, int32_t token);
  // The entries added since the last Take (streaming) or all of them.
  Json Take();

 private:
  const tokenizer::Tokenizer& tok_;
  int num_top_;
  bool as_ids_;
  size_t text_offset_ = 0;
  Json tokens_ = Json::array(), token_logprobs_ = Json::array(), top_ = Json::array(),
       offsets_ = Json::array();
};

// vLLM's prompt_logprobs: per prompt position, null for the first, else
// {"<token id>": {logprob, rank, decoded_token}} holding the prompt token and the `num_top` most
// likely tokens (rank 1-based; null for a prompt token outside the top, whose rank the engine
// does not report).
Json PromptLogprobsJson(const tokenizer::Tokenizer& tok,
                        const std::vector<std::optional<engine::TokenLogprobs>>& logprobs,
                        const std::vector<int32_t>& prompt, int num_top);

// One chat logprobs.content entry.
Json ChatLogprobEntry(const tokenizer::Tokenizer& tok, const engine::TokenLogprobs& lp, int num_top,
                      bool as_ids);

}  // namespace moeserve::server
