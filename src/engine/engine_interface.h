// What the serving front end needs from an engine. Implemented by LLMEngine (the real one) and by
// ScriptedEngine (a test double that replays given tokens, for end-to-end tests of the API layer
// without a model).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/sampling_params.h"

namespace moeserve::engine {

// Why a request ended (the OpenAI finish_reason it maps to).
enum class FinishReason {
  kNone,
  kStop,    // EOS, a stop token id or a stop string
  kLength,  // max_tokens or max_model_len
  kAbort,   // cancelled by the client or the engine
};
const char* FinishReasonName(FinishReason reason);  // "stop", "length", "abort" (OpenAI names)

struct TokenLogprobs {
  int32_t token = -1;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // params.logprobs entries, descending
};

// What a sequence produced in one step.
struct EngineOutput {
  uint64_t request_id = 0;
  std::vector<int32_t> new_tokens;          // 0 or 1 per step
  std::vector<TokenLogprobs> new_logprobs;  // parallel to new_tokens when params.logprobs >= 0
  // With the first output only, when params.prompt_logprobs >= 0: one entry per prompt token;
  // the first has no logprob (nullopt), as in vLLM.
  std::vector<std::optional<TokenLogprobs>> prompt_logprobs;
  bool finished = false;
  FinishReason reason = FinishReason::kNone;
  int32_t stop_token_id = -1;
  size_t num_prompt_tokens = 0;
  size_t num_output_tokens = 0;
  size_t num_cached_tokens = 0;
};

class RequestSink {
 public:
  virtual ~RequestSink() = default;
  // Engine thread, after each step that advanced the request. Return a stop string to end the
  // request there (finish reason "stop"); the sink then receives no further calls. A finished
  // output (EOS, max_tokens, ...) is the last call too.
  virtual std::optional<std::string> OnOutput(const EngineOutput& out) = 0;
};

struct EngineStats {
  size_t num_running = 0, num_waiting = 0;
  size_t kv_blocks_total = 0, kv_blocks_used = 0;
  uint64_t prompt_tokens = 0, generation_tokens = 0, prefix_cache_hit_tokens = 0;
  uint64_t num_preemptions = 0, steps = 0;
};

class EngineInterface {
 public:
  virtual ~EngineInterface() = default;
  // Thread-safe. "" when queued, else why the request can never run (a 400 message).
  virtual std::string AddRequest(uint64_t id, std::vector<int32_t> prompt, SamplingParams params,
                                 std::shared_ptr<RequestSink> sink) = 0;
  // Thread-safe. When Abort returns, the request's sink is not running and is never called again
  // (a call in progress on the engine thread is waited for, so a sink must not call Abort). The
  // request's KV blocks are freed by the engine's next step. Unknown or finished ids are ignored.
  virtual void Abort(uint64_t id) = 0;
  // Thread-safe snapshot of gauges and counters.
  virtual EngineStats Stats() const = 0;
  // The longest prompt + completion a request may have.
  virtual size_t max_model_len() const = 0;
  virtual size_t vocab_size() const = 0;
};

}  // namespace moeserve::engine
