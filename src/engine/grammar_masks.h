// Computes the grammar masks of a step's constrained sequences on a helper thread while the
// model's forward runs, so structured outputs add no serial time to a step in the common case
// (a mask costs microseconds once its grammar states are classified, tens of milliseconds the
// first time a state is met: compiled_grammar.h).
//
// Thread-safety: Start and Wait are called by the engine thread, in pairs; between them the
// helper owns the listed SamplerStates and the engine must not touch them.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/sampler.h"

namespace moeserve::engine {

class GrammarMaskWorker {
 public:
  GrammarMaskWorker() = default;
  ~GrammarMaskWorker();

  // Starts PrepareGrammarMask on each state (none: returns at once; the thread starts lazily).
  void Start(std::vector<SamplerState*> states);
  // Returns once every state of the last Start has its mask.
  void Wait();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<SamplerState*> work_;  // guarded by mu_
  bool busy_ = false;                // guarded by mu_
  bool stop_ = false;                // guarded by mu_
  std::thread thread_;
};

}  // namespace moeserve::engine
