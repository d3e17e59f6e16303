#include "engine/sequence.h"

#include <utility>

#include "core/check.h"

namespace moeserve::engine {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
  }
  return "?";
}

Sequence::Sequence(uint64_t id, std::vector<int32_t> prompt, SamplingParams params,
                   uint64_t fallback_seed)
    : id_(id),
      tokens_(std::move(prompt)),
      num_prompt_tokens_(tokens_.size()),
      params_(std::move(params)),
      sampler_state_(params_, tokens_, fallback_seed) {
  MOESERVE_CHECK(!tokens_.empty(), "sequence ", id, " has an empty prompt");
}

void Sequence::AppendToken(int32_t token) {
  tokens_.push_back(token);
  sampler_state_.Accept(token);
}

}  // namespace moeserve::engine
