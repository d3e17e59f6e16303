// Communicator over MPI (Open MPI from Debian): one rank per process, started by mpirun on one
// host or many. Collectives are called from one thread at a time (the engine thread), so MPI is
// initialised with MPI_THREAD_SERIALIZED. A rank that dies makes mpirun stop the whole job with a
// message naming it (MPI_ERRORS_ARE_FATAL), so survivors never hang in a collective.
#pragma once

#include "dist/communicator.h"

namespace moeserve::dist {

class MpiCommunicator final : public Communicator {
 public:
  // True when this process was started by mpirun (or another PMI launcher).
  static bool LaunchedByMpi();

  MpiCommunicator();            // MPI_Init_thread
  ~MpiCommunicator() override;  // MPI_Finalize

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void AllReduceSum(float* data, size_t count) override;
  void AllReduceSum(bf16* data, size_t count) override;
  void AllGather(const void* send, void* recv, size_t bytes_per_rank) override;
  void Broadcast(void* data, size_t bytes, int root) override;
  void Barrier() override;
  double SecondsInCollectives() const override { return seconds_; }

 private:
  int rank_ = 0, size_ = 1;
  double seconds_ = 0;
};

}  // namespace moeserve::dist
