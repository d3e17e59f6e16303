// A test double for the serving front end: an EngineInterface that runs no model and answers every
// request with the same scripted token sequence, one token per tick on its own thread. It honours
// what the server relies on: max_tokens (finish "length"), EOS and stop_token_ids (finish "stop",
// after min_tokens, unless ignore_eos), stop strings returned by the sink, Abort, logprobs (every
// scripted token has probability 1) and Stats (KV blocks as a paged cache would hold them).
// When the script runs out, the first EOS id is emitted (or the request ends "stop" without one).
//
// Thread-safety: every public method is safe from any thread. Sinks run on the engine thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/llm_engine.h"

namespace moeserve::engine {

struct ScriptedEngineConfig {
  std::vector<int32_t> reply;          // the tokens every request generates, in order
  std::vector<int32_t> eos_token_ids;  // ends a request like a real EOS
  size_t vocab_size = 0;
  size_t max_model_len = 4096;
  size_t block_size = 16;
  size_t num_kv_blocks = 4096;
  std::chrono::microseconds tick{2000};  // time between two tokens of a request
};

class ScriptedEngine final : public EngineInterface {
 public:
  explicit ScriptedEngine(ScriptedEngineConfig config);
  ~ScriptedEngine() override;  // stops the thread; unfinished requests get no further calls

  std::string AddRequest(uint64_t id, std::vector<int32_t> prompt, SamplingParams params,
                         std::shared_ptr<RequestSink> sink) override;
  void Abort(uint64_t id) override;
  EngineStats Stats() const override;
  size_t max_model_len() const override { return config_.max_model_len; }
  size_t vocab_size() const override { return config_.vocab_size; }

 private:
  struct Request {
    std::vector<int32_t> prompt;
    SamplingParams params;
    std::shared_ptr<RequestSink> sink;
    size_t num_output = 0;
    bool first = true;
  };
  void Run();
  // Advances one request by one token; returns true when it finished.
  bool Advance(uint64_t id, Request& r);
  size_t BlocksOf(const Request& r) const;

  const ScriptedEngineConfig config_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::unordered_map<uint64_t, Request> requests_;  // guarded by mu_
  bool stop_ = false;
  // The request whose sink runs right now (outside requests_), and whether Abort hit it.
  std::optional<uint64_t> advancing_;
  bool advancing_aborted_ = false;
  std::condition_variable advanced_;  // signalled when advancing_ is reset
  EngineStats stats_;                 // guarded by mu_
  std::thread thread_;
};

}  // namespace moeserve::engine
