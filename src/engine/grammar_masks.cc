#include "engine/grammar_masks.h"

namespace moeserve::engine {

GrammarMaskWorker::~GrammarMaskWorker() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GrammarMaskWorker::Start(std::vector<SamplerState*> states) {
  if (states.empty()) return;
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  {
    std::lock_guard lock(mu_);
    work_ = std::move(states);
    busy_ = true;
  }
  cv_.notify_all();
}

void GrammarMaskWorker::Wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !busy_; });
}

void GrammarMaskWorker::Loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || busy_; });
    if (stop_) return;
    std::vector<SamplerState*> work = std::move(work_);
    lock.unlock();
    for (SamplerState* s : work) s->PrepareGrammarMask();
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace moeserve::engine
