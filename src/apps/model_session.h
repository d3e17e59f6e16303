// Loading a model for a command, on one rank or several. With -tp N > 1 outside MPI, the command
// re-executes itself under `mpirun -np N` (users need not know MPI); under mpirun (one host or a
// --hostfile) each process becomes one rank: rank 0 returns a session whose model broadcasts
// every step, the other ranks serve those steps until rank 0 finishes, then return a worker
// session the command simply exits from.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>

#include "apps/model_options.h"
#include "dist/communicator.h"
#include "kernels/context.h"
#include "model/model.h"
#include "runtime/thread_pool.h"

namespace moeserve::apps {

struct ParallelOptions {
  int tensor_parallel_size = 1;
  bool expert_parallel = false;
};

// -tp / --tensor-parallel-size and --enable-expert-parallel.
void AddParallelOptions(CLI::App& app, ParallelOptions& opts);

// The process's own arguments, recorded by main() for re-execution under mpirun.
void SetProcessArgs(int argc, char** argv);

class ModelSession {
 public:
  // May not return (re-exec under mpirun). Throws moeserve::Error on bad options or models.
  static std::unique_ptr<ModelSession> Open(const ModelOptions& model, const ParallelOptions& par);
  ~ModelSession();

  bool is_worker() const { return is_worker_; }
  model::Model& model() { return *model_; }
  ThreadPool& pool() { return *pool_; }
  kernels::KernelContext& kernels() { return *kernels_; }
  dist::Communicator& comm() { return *comm_; }
  // Phase timings of this rank's steps, off until a command enables them (bench --profile).
  model::StepProfile& profile() { return profile_; }
  model::RunContext context() { return {kernels_.get(), comm_.get(), &profile_}; }

 private:
  ModelSession() = default;
  // Destruction order matters: the model (whose destructor releases the workers) before the
  // communicator.
  std::unique_ptr<dist::Communicator> comm_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<kernels::KernelContext> kernels_;  // the ISA resolved once, for every step
  model::StepProfile profile_;
  std::unique_ptr<model::Model> model_;
  bool is_worker_ = false;
};

}  // namespace moeserve::apps
