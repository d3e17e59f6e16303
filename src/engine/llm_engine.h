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

struct EngineConfig {
  SchedulerConfig scheduler;
  DType kv_cache_dtype = DType::kBF16;  // or kF8E4M3 (--kv-cache-dtype fp8)
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
