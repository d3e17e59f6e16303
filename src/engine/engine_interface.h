// What the serving front end needs from an engine. Implemented by LLMEngine (the real one) and by
// ScriptedEngine (a test double that replays given tokens, for end-to-end tests of the API layer
// without a model).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/sampling_params.h"

namespace moeserve::engine {

class RequestSink;
struct EngineStats;

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
