// Per-request decoding settings, with the names, defaults and ranges that vLLM and the OpenAI API
// use, so a request body maps onto it field by field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace moeserve::grammar {
class CompiledGrammar;
}

namespace moeserve::engine {

struct SamplingParams {
  float temperature = 1.0f;  // < 1e-5 means greedy (as vLLM)
  int top_k = 0;             // 0 or -1: off
  float top_p = 1.0f;        // in (0, 1]
  float min_p = 0.0f;        // in [0, 1]; keeps tokens with prob >= min_p * max prob
  std::optional<uint64_t> seed;
  float presence_penalty = 0.0f;    // OpenAI: logit -= presence * (count > 0), output tokens
  float frequency_penalty = 0.0f;   // OpenAI: logit -= frequency * count, output tokens
  float repetition_penalty = 1.0f;  // HF/vLLM: prompt and output tokens, divide positive logits
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, added to the logit)
  int max_tokens = 16;
  int min_tokens = 0;  // EOS and stop_token_ids are masked until this many tokens are generated
  bool ignore_eos = false;
  std::vector<std::string> stop;        // stop strings: checked by the engine after detokenizing
  std::vector<int32_t> stop_token_ids;  // finish when one of these is generated (kept in output)
  int logprobs = -1;                    // -1: none; 0: the sampled token's; k: plus the top k
  int prompt_logprobs = -1;             // same, for every prompt position after the first
  bool skip_special_tokens = true;
  int n = 1;
  // Structured output: only tokens the grammar allows are sampled (grammar/compiled_grammar.h;
  // built by the server from the tokenizer's token bytes and cached per schema). The mask comes
  // after min_tokens, logit_bias and penalties and before temperature / top-k / top-p; reported
  // logprobs are those of the masked raw logits (vLLM applies the bitmask to the logits before
  // its sampler computes them). The sequence finishes ("stop") when the grammar has ended.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  // Reasoning models: the grammar applies only after these bytes were generated (e.g.
  // "</think>"); the model thinks unconstrained until then. "": from the first token.
  std::string grammar_start_after;

  // "" if every field is in range for a model with `vocab_size` tokens, else a message naming
  // the first offending field and value (fit for a 400 response).
  std::string Validate(size_t vocab_size) const;

  bool IsGreedy() const { return temperature < kGreedyTemperature; }

  static constexpr float kGreedyTemperature = 1e-5f;
  static constexpr int kMaxLogprobs = 20;
  static constexpr int kMaxN = 128;
};

}  // namespace moeserve::engine
