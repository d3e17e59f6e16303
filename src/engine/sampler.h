// Turns one row of logits into one token, the way vLLM V1 does for the same SamplingParams:
//   1. logprobs (if asked) from the RAW logits: log_softmax before any processing
//      (vLLM's default logprobs_mode "raw_logprobs");
//   2. min_tokens (mask EOS and stop_token_ids while too few tokens are generated), logit_bias;
//   3. repetition penalty (prompt and output tokens), frequency and presence penalties (output);
//   4. greedy (temperature < 1e-5, or top_k == 1): argmax, ties to the lowest id;
//   5. otherwise divide by temperature, min_p, top_k, top_p (vLLM V1's order: min_p is applied
//      before top-k/top-p), then draw from the softmax of what is left with the sequence's RNG.
// Each sequence carries its own SamplerState (RNG and token counts), so a seeded request gives
// the same tokens whatever else is in the batch.
//
// Thread-safety: a Sampler holds scratch buffers; use one per thread. SamplerState belongs to one
// sequence and must not be shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/sampling_params.h"

namespace moeserve::engine {

class SamplerState {
 public:
  // The RNG is seeded from params.seed when given, else from `fallback_seed` (the engine draws it
  // from its own counter, so unseeded requests differ from each other).
  SamplerState(const SamplingParams& params, std::span<const int32_t> prompt_tokens,
               uint64_t fallback_seed);

  // Records a generated token (for frequency / presence / repetition penalties).
  void Accept(int32_t token);

  std::mt19937_64& rng() { return rng_; }
  // Occurrences of each generated token.
  const std::unordered_map<int32_t, int32_t>& output_counts() const { return output_counts_; }
  // Sorted distinct prompt ids; kept only when the repetition penalty is on.
  const std::vector<int32_t>& prompt_tokens() const { return prompt_tokens_; }

 private:
  std::mt19937_64 rng_;
  std::unordered_map<int32_t, int32_t> output_counts_;
  std::vector<int32_t> prompt_tokens_;
};

struct SampleResult {
  int32_t token = -1;
  // log_softmax(raw logits)[token]; only computed when params.logprobs >= 0, else 0.
  float logprob = 0.0f;
  // The params.logprobs highest raw logprobs, descending, ties to the lower id.
  std::vector<std::pair<int32_t, float>> top_logprobs;
};

class Sampler {
 public:
  // `logits`: [vocab] raw model output for the position being sampled. `eos_ids`: the model's
  // end-of-sequence ids (masked by min_tokens unless params.ignore_eos). `num_generated`: output
  // tokens so far. Does not call state.Accept: the scheduler does when it appends the token.
  SampleResult Sample(const float* logits, size_t vocab, const SamplingParams& params,
                      SamplerState& state, std::span<const int32_t> eos_ids, size_t num_generated);

 private:
  // Indices of `work_` that survive filtering when not all do.
  int32_t SampleFiltered(const SamplingParams& params, std::mt19937_64& rng, size_t vocab);

  std::vector<float> work_;     // [vocab] processed logits
  std::vector<int32_t> cand_;   // candidate ids
  std::vector<float> weights_;  // unnormalized probabilities of cand_
};

// Steps 2-3 above, in place on a copy of the logits: min_tokens masking, logit_bias, repetition,
// frequency and presence penalties.
void ProcessLogits(std::span<float> logits, const SamplingParams& params, const SamplerState& state,
                   std::span<const int32_t> eos_ids, size_t num_generated);

// log_softmax over [vocab] (for prompt logprobs / echo).
std::vector<float> LogSoftmax(const float* logits, size_t vocab);
// log(sum(exp(logits))), stable.
float LogSumExp(const float* logits, size_t vocab);
// log_softmax(logits)[token], without materializing the row.
float TokenLogprob(const float* logits, size_t vocab, int32_t token);
// The k highest log_softmax entries, descending, ties to the lower id. O(vocab log k).
std::vector<std::pair<int32_t, float>> TopLogprobs(const float* logits, size_t vocab, size_t k);

// Index of the largest logit, ties to the lowest id.
int32_t ArgMax(const float* logits, size_t vocab);

}  // namespace moeserve::engine
