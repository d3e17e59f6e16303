// The engine: owns the scheduler, the KV pool and the sampler, and runs forward steps on one
// thread. Callers (the HTTP server, `moeserve generate`) submit requests from any thread and get
// each step's tokens back through a RequestSink.
//
// Flow of one step (DESIGN.md): take queued requests and aborts -> Scheduler::Schedule ->
// Model::Forward on the flat batch (grammar masks computed meanwhile on a helper thread) -> sample
// each sequence that reached its last token -> Scheduler::Postprocess (append, EOS / max_tokens /
// length) -> RequestSink::OnOutput per sequence, which may end it on a stop string -> free finished
// sequences' blocks.
//
// Thread-safety: AddRequest, Abort, Stats are safe from any thread. Step / RunLoop run on the
// single engine thread. Sinks are called on the engine thread, one at a time, and must not block
// or call back into the engine.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cache/kv_pool.h"
#include "engine/engine_interface.h"
#include "engine/grammar_masks.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "model/model.h"

namespace moeserve::engine {

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

struct EngineConfig {
  SchedulerConfig scheduler;
  DType kv_cache_dtype = DType::kBF16;  // or kF8E4M3 (--kv-cache-dtype fp8)
};

struct EngineStats {
  size_t num_running = 0, num_waiting = 0;
  size_t kv_blocks_total = 0, kv_blocks_used = 0;
  uint64_t prompt_tokens = 0, generation_tokens = 0, prefix_cache_hit_tokens = 0;
  uint64_t num_preemptions = 0, steps = 0;
};

class LLMEngine final : public EngineInterface {
 public:
  // `model` and `ctx` must outlive the engine. The KV pool is sized by config.scheduler.
  LLMEngine(model::Model& model, const EngineConfig& config, model::RunContext ctx);
  ~LLMEngine();

  // Thread-safe. Returns "" when queued, else why the request can never run (a 400 message).
  std::string AddRequest(uint64_t id, std::vector<int32_t> prompt, SamplingParams params,
                         std::shared_ptr<RequestSink> sink) override;
  // Thread-safe; the contract is EngineInterface::Abort's (no sink call after it returns, blocks
  // freed by the next step).
  void Abort(uint64_t id) override;

  // Engine thread: one step. Returns false when there was nothing to do.
  bool Step();
  // Engine thread: Step until Shutdown(); sleeps while idle.
  void RunLoop();
  // Thread-safe: RunLoop returns after the current step.
  void Shutdown();
  // Engine thread or offline use: steps until every request finished.
  void RunUntilIdle();

  EngineStats Stats() const override;
  size_t max_model_len() const override { return scheduler_.config().max_model_len; }
  size_t vocab_size() const override { return model_.config().vocab_size; }
  const model::Model& model() const { return model_; }
  const SchedulerConfig& scheduler_config() const { return scheduler_.config(); }

 private:
  struct Pending {
    uint64_t id;
    std::vector<int32_t> prompt;
    SamplingParams params;
  };
  void DrainQueues();
  // Copies scheduler and cache gauges into stats_ for other threads (engine thread only).
  void PublishStats();
  model::Batch BuildBatch(const ScheduledStep& step, std::vector<size_t>& logits_row_of_seq);
  void EmitPromptLogprobs(const ScheduledStep& step, const std::vector<size_t>& first_row,
                          const float* logits);

  model::Model& model_;
  model::RunContext ctx_;
  Scheduler scheduler_;
  cache::KvPool kv_;
  Sampler sampler_;
  GrammarMaskWorker grammar_masks_;
  std::vector<float> logits_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<Pending> incoming_;
  std::vector<uint64_t> aborts_;
  bool shutdown_ = false;

  // The sinks of live requests. Abort removes a sink under sinks_mu_, and the engine thread holds
  // sinks_mu_ while it calls one, so no call can start or still run once Abort has returned.
  std::mutex sinks_mu_;
  std::unordered_map<uint64_t, std::shared_ptr<RequestSink>> sinks_;  // guarded by sinks_mu_

  // Engine-thread state.
  std::unordered_map<uint64_t, std::vector<std::optional<TokenLogprobs>>> prompt_logprobs_;
  EngineStats stats_;  // guarded by mu_; gauges refreshed after every step
};

}  // namespace moeserve::engine
