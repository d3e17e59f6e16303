// A loaded model ready to run forward steps on this rank's shard.
#pragma once

#include <memory>
#include <string>

#include "dist/communicator.h"
#include "kernels/context.h"
#include "model/batch.h"
#include "model/model_config.h"
#include "model/step_profile.h"

namespace moeserve::model {

// What a forward step runs on. Not owned; must outlive the model. The kernel context holds the
// thread pool, the ISA the kernels run and their scratch.
struct RunContext {
  kernels::KernelContext* kernels = nullptr;
  dist::Communicator* comm = nullptr;
  StepProfile* profile = nullptr;  // null: steps are not timed by phase
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual KvLayout kv_layout() const = 0;
  // Bytes of weights this rank reads to decode one token (embedding row excluded, top-k experts
  // only): the denominator of the decode bandwidth figure.
  virtual size_t DecodeBytesPerToken() const = 0;
  // Bytes of weights resident for this rank.
  virtual size_t WeightBytes() const = 0;

  // Runs the batch; writes its K/V into `kv`; logits [batch.logits_rows.size(), vocab_size] f32.
  // `logits` null: no LM head, as on a follower rank of a distributed step (the head is
  // replicated and rank 0 samples); the batch's logits_rows still matter there, since a model may
  // run its last layer only on those rows, and every rank must run the same rows.
  // Not thread-safe: one forward at a time.
  virtual void Forward(const Batch& batch, KvStorage& kv, float* logits) = 0;
};

}  // namespace moeserve::model
