// Tensor / expert parallelism across ranks: rank 0 owns the scheduler and decides every step;
// the other ranks run the same forward on their shards. Rank 0's model is wrapped in a
// StepBroadcaster, which sends each step's batch (tokens, per-sequence context and block tables,
// KV pool shape) to the workers before running it; workers sit in RunWorker until rank 0 stops.
// Every rank keeps its own KV pool with the same block ids, holding its own kv heads.
#pragma once

#include <memory>

#include "dist/communicator.h"
#include "model/model.h"

namespace moeserve::engine {

class StepBroadcaster final : public model::Model {
 public:
  StepBroadcaster(std::unique_ptr<model::Model> inner, dist::Communicator& comm);
  ~StepBroadcaster() override;  // tells the workers to exit

  const model::ModelConfig& config() const override { return inner_->config(); }
  model::KvLayout kv_layout() const override { return inner_->kv_layout(); }
  size_t DecodeBytesPerToken() const override { return inner_->DecodeBytesPerToken(); }
  size_t WeightBytes() const override { return inner_->WeightBytes(); }
  void Forward(const model::Batch& batch, model::KvStorage& kv, float* logits) override;

 private:
  std::unique_ptr<model::Model> inner_;
  dist::Communicator& comm_;
};

// Ranks > 0: receive and run steps until rank 0's StepBroadcaster is destroyed.
void RunWorker(model::Model& model, dist::Communicator& comm);

}  // namespace moeserve::engine
