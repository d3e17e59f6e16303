// One generation request (one of its n samples): its tokens, its decoding settings and state, and
// where it stands in the scheduler. Owned by the Scheduler.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cache/block_manager.h"
#include "engine/engine_interface.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"

namespace moeserve::engine {

enum class SeqStatus {
  kWaiting,   // queued, or preempted and waiting to be recomputed
  kRunning,   // holds KV blocks; scheduled every step until it finishes
  kFinished,  // blocks released; see finish_reason()
};

class Sequence {
 public:
  Sequence(uint64_t id, std::vector<int32_t> prompt, SamplingParams params, uint64_t fallback_seed);

  uint64_t id() const { return id_; }
  const SamplingParams& params() const { return params_; }
  SamplerState& sampler_state() { return sampler_state_; }

  // Prompt then generated ids: what the model has seen or will see.
  std::span<const int32_t> tokens() const { return tokens_; }
  std::span<const int32_t> prompt() const { return {tokens_.data(), num_prompt_tokens_}; }
  std::span<const int32_t> output() const {
    return std::span<const int32_t>(tokens_).subspan(num_prompt_tokens_);
  }
  size_t num_tokens() const { return tokens_.size(); }
  size_t num_prompt_tokens() const { return num_prompt_tokens_; }
  size_t num_output_tokens() const { return tokens_.size() - num_prompt_tokens_; }

  // Tokens whose KV is in the cache. num_tokens() - num_computed_tokens() is what is left to
  // feed: 1 while decoding, more while (re)computing a prefix.
  size_t num_computed_tokens() const { return num_computed_tokens_; }
  bool is_prefilling() const { return num_tokens() - num_computed_tokens_ > 1; }

  SeqStatus status() const { return status_; }
  bool is_finished() const { return status_ == SeqStatus::kFinished; }
  FinishReason finish_reason() const { return finish_reason_; }
  // The stop token id that ended it, or -1 (vLLM's stop_reason for stop_token_ids).
  int32_t stop_token_id() const { return stop_token_id_; }
  // The stop string that ended it, set by Scheduler::FinishSequence.
  const std::string& stop_string() const { return stop_string_; }

  const cache::SeqBlocks& blocks() const { return blocks_; }
  // Prompt tokens served from the prefix cache at the first admission.
  size_t num_cached_prompt_tokens() const { return num_cached_prompt_tokens_; }
  int num_preemptions() const { return num_preemptions_; }
  uint64_t arrival() const { return arrival_; }

 private:
  friend class Scheduler;

  void AppendToken(int32_t token);

  uint64_t id_;
  std::vector<int32_t> tokens_;
  size_t num_prompt_tokens_;
  SamplingParams params_;
  SamplerState sampler_state_;
  uint64_t arrival_ = 0;  // admission order: FCFS and preemption victims
  SeqStatus status_ = SeqStatus::kWaiting;
  FinishReason finish_reason_ = FinishReason::kNone;
  int32_t stop_token_id_ = -1;
  std::string stop_string_;
  size_t num_computed_tokens_ = 0;
  size_t num_cached_prompt_tokens_ = 0;
  bool admitted_before_ = false;
  uint64_t scheduled_in_step_ = 0;  // Scheduler's step id when last scheduled
  int num_preemptions_ = 0;
  cache::SeqBlocks blocks_;
};

}  // namespace moeserve::engine
