// Collectives between the ranks that together hold one model (tensor / expert parallelism).
//
// The model calls these inside a block, not only after o_proj and the MoE: MiniMax-M2's full-width
// QK-norm all-reduces each rank's sums of squares between the projections and RoPE.
// Contract: every rank calls the same collectives in the same order with the same sizes.
#pragma once

#include <cstddef>
#include <memory>

#include "core/dtype.h"

namespace moeserve::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place: data[i] = Σ over ranks of data[i].
  virtual void AllReduceSum(float* data, size_t count) = 0;
  // bf16 payload (half the bytes on the wire); summed in f32, rounded once.
  virtual void AllReduceSum(bf16* data, size_t count) = 0;
  // recv [size() * count]: rank r's send lands at recv + r * count.
  virtual void AllGather(const void* send, void* recv, size_t bytes_per_rank) = 0;
  // root's bytes copied to every rank's data.
  virtual void Broadcast(void* data, size_t bytes, int root) = 0;
  virtual void Barrier() = 0;

  // Seconds spent inside collectives since construction (for the benchmark's breakdown).
  virtual double SecondsInCollectives() const = 0;
};

// The communicator of a single process: every collective is the identity.
class SingleRankCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void AllReduceSum(float*, size_t) override {}
  void AllReduceSum(bf16*, size_t) override {}
  void AllGather(const void* send, void* recv, size_t bytes_per_rank) override;
  void Broadcast(void*, size_t, int) override {}
  void Barrier() override {}
  double SecondsInCollectives() const override { return 0; }
};

}  // namespace moeserve::dist
