#include "apps/model_session.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/log.h"
#include "engine/distributed.h"
#include "model/registry.h"
#include "runtime/cpu_features.h"
#ifdef MOESERVE_HAVE_MPI
#include "dist/mpi_communicator.h"
#endif

namespace moeserve::apps {
namespace {

std::vector<std::string>& ProcessArgs() {
  static std::vector<std::string> args;
  return args;
}

[[noreturn]] void ReexecUnderMpirun(int ranks) {
  std::vector<std::string> cmd = {"mpirun",          "-np",       std::to_string(ranks),
                                  "--oversubscribe", "--bind-to", "none"};
  if (::geteuid() == 0) cmd.push_back("--allow-run-as-root");
  cmd.push_back("/proc/self/exe");
  const auto& args = ProcessArgs();
  cmd.insert(cmd.end(), args.begin() + 1, args.end());
  std::vector<char*> argv;
  for (auto& a : cmd) argv.push_back(a.data());
  argv.push_back(nullptr);
  // /proc/self/exe names mpirun after exec: resolve our own path first.
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = 0;
    cmd[cmd.size() - args.size()] = self;
    argv[cmd.size() - args.size()] = cmd[cmd.size() - args.size()].data();
  }
  LogInfo("starting ", ranks, " ranks: mpirun -np ", ranks, " ", self, " ...");
  // A command may have blocked SIGINT/SIGTERM for its own signal thread (serve does); exec keeps
  // the mask, and mpirun must receive them to stop every rank.
  sigset_t none;
  sigemptyset(&none);
  pthread_sigmask(SIG_SETMASK, &none, nullptr);
  ::execvp("mpirun", argv.data());
  Fail("-tp ", ranks, " needs Open MPI's mpirun on PATH (Debian: apt-get install openmpi-bin): ",
       std::strerror(errno));
}

// Resident set size of this process in MiB, from /proc/self/status (0 if unavailable).
size_t RssMiB() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  size_t kib = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmRSS: %zu kB", &kib) == 1) break;
  std::fclose(f);
  return kib / 1024;
}

size_t DefaultThreads(int local_ranks) {
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  return std::max<size_t>(1, cores / static_cast<size_t>(std::max(local_ranks, 1)));
}

}  // namespace

void AddParallelOptions(CLI::App& app, ParallelOptions& opts) {
  app.add_option("--tensor-parallel-size", opts.tensor_parallel_size,
                 "Ranks that share the model (alias -tp; tensor parallelism, started with mpirun)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_flag("--enable-expert-parallel", opts.expert_parallel,
               "Whole experts per rank instead of slicing every expert");
}

void SetProcessArgs(int argc, char** argv) {
  ProcessArgs().assign(argv, argv + argc);
}

std::unique_ptr<ModelSession> ModelSession::Open(const ModelOptions& mo,
                                                 const ParallelOptions& po) {
  std::unique_ptr<ModelSession> s(new ModelSession());
  const int tp = po.tensor_parallel_size;
  int local_ranks = 1;
#ifdef MOESERVE_HAVE_MPI
  if (dist::MpiCommunicator::LaunchedByMpi()) {
    s->comm_ = std::make_unique<dist::MpiCommunicator>();
    if (s->comm_->size() != tp)
      Fail("started with ", s->comm_->size(), " MPI ranks but -tp is ", tp,
           ": pass -tp equal to mpirun's -np");
    if (const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) local_ranks = std::atoi(v);
  } else if (tp > 1) {
    ReexecUnderMpirun(tp);
  }
#else
  if (tp > 1) Fail("-tp ", tp, " needs a build with MPI (install libopenmpi-dev and rebuild)");
#endif
  if (!s->comm_) s->comm_ = std::make_unique<dist::SingleRankCommunicator>();
  if (po.expert_parallel && tp == 1) LogWarn("--enable-expert-parallel has no effect at -tp 1");
  s->pool_ = std::make_unique<ThreadPool>(mo.threads ? mo.threads : DefaultThreads(local_ranks));
  s->kernels_ = std::make_unique<kernels::KernelContext>(*s->pool_);
  const model::Parallelism par{{s->comm_->rank(), s->comm_->size()}, po.expert_parallel};
  model::LoadOptions lo = model::WeightLayoutFor(s->kernels_->isa(), mo.weight_layout == "auto");
  lo.int8_activations = mo.activation_dtype != "bf16";  // "auto" is int8 (model_options.h)
  auto model = model::LoadModel(mo.model_dir, par, s->context(), lo);
  // Weights are mmap'd views: a rank's RSS grows only with the slices it touches.
  LogInfo("rank ", s->comm_->rank(), "/", s->comm_->size(), ": ", model->WeightBytes() >> 20,
          " MiB of weights in its shard, RSS ", RssMiB(), " MiB after loading");
  if (s->comm_->size() == 1) {
    s->model_ = std::move(model);
  } else if (s->comm_->rank() == 0) {
    s->model_ = std::make_unique<engine::StepBroadcaster>(std::move(model), *s->comm_);
  } else {
    engine::RunWorker(*model, *s->comm_);
    s->model_ = std::move(model);
    s->is_worker_ = true;
  }
  return s;
}

ModelSession::~ModelSession() = default;

}  // namespace moeserve::apps
