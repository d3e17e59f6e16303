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

  // fn(r0, r1) over contiguous ranges of [0, rows) on the pool's threads (inline without a
  // kernel context), for the per-token steps between the matmuls (norms, residual adds, RoPE):
  // each row's arithmetic is the same wherever it runs, so results do not depend on the split.
  // fn must not throw (pool workers abort on exceptions). Why: run on one thread they held ~4%
  // of a 512-token prefill on 2 cores while the other core waited.
  template <typename Fn>
  void ForRows(size_t rows, const Fn& fn) const {
    if (kernels == nullptr || rows < 2) return fn(size_t{0}, rows);
    kernels->pool().ParallelFor(rows, 1, [&](size_t r0, size_t r1) { fn(r0, r1); });
  }
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
