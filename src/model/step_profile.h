// Where a forward step's time goes (`moeserve bench --profile`): seconds, weight bytes read and
// arithmetic per phase of the step, summed over the steps since Reset. The blocks time their phases
// through the RunContext's profile; with none, or with it disabled, a phase costs one branch.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace moeserve::model {

enum class Phase : uint8_t {
  kQkvProjection,  // q, k, v projections (one MatMulSharedX)
  kQkNormRope,     // q/k norm, RoPE, the K/V cache write and the block-table views
  kAttention,      // the attention kernel over the paged cache
  kOutProjection,  // o_proj
  kRouter,         // router logits and top-k
  kExperts,        // the routed experts (MoeExperts)
  kLmHead,         // final norm of the logits rows and the LM head
};
inline constexpr size_t kPhases = 7;

inline const char* PhaseName(Phase p) {
  constexpr const char* kNames[kPhases] = {"qkv projection", "q/k norm, rope, kv write",
                                           "attention",      "o projection",
                                           "router",         "experts",
                                           "lm head"};
  return kNames[static_cast<size_t>(p)];
}

struct StepProfile {
  bool enabled = false;
  double seconds[kPhases] = {};
  double bytes[kPhases] = {};  // weight bytes the phase read (each matrix once per step)
  // Its operations, 2 per multiply-add of its matmuls (attention: q·k and p·v), this rank's: what a
  // prefill's phases are measured by, as a decode's are by their bytes.
  double flops[kPhases] = {};

  void Reset() {
    for (size_t i = 0; i < kPhases; ++i) seconds[i] = bytes[i] = flops[i] = 0;
  }
};

// Adds the time from construction to destruction, and the weight bytes the phase reads and its
// operations, to the profile's phase. `bytes` and `flops` are numbers or callables returning one;
// a callable runs only while the profile is enabled, so steps that are not profiled never count.
class PhaseTimer {
 public:
  template <typename Bytes = size_t, typename Flops = double>
  PhaseTimer(StepProfile* profile, Phase phase, const Bytes& bytes = 0, const Flops& flops = 0)
      : profile_(profile && profile->enabled ? profile : nullptr), phase_(phase) {
    if (!profile_) return;
    profile_->bytes[static_cast<size_t>(phase)] += Value(bytes);
    profile_->flops[static_cast<size_t>(phase)] += Value(flops);
    start_ = std::chrono::steady_clock::now();
  }
  ~PhaseTimer() {
    if (profile_)
      profile_->seconds[static_cast<size_t>(phase_)] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  template <typename T>
  static double Value(const T& x) {
    if constexpr (std::is_invocable_v<const T&>)
      return static_cast<double>(x());
    else
      return static_cast<double>(x);
  }

  StepProfile* profile_;
  Phase phase_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace moeserve::model
