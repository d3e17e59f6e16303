// Scratch of one forward step, shared by every layer's blocks. Layers run one after another, so
// one set of buffers, sized by the step's tokens, serves them all: activations cost one layer's
// worth. (Each block used to own its buffers, so a full-budget step left num_layers copies of
// q, k, v and the attention output resident for good: for MiniMax-M2's 62 layers at 2048 tokens,
// ~7 GB; for the bundled 4-layer model, the soak benchmark's +26 MB idle-RSS step.)
#pragma once

#include <cstdint>
#include <vector>

namespace moeserve::model {

struct StepScratch {
  std::vector<float> q, k, v, attn;                // attention: [T, this rank's q / kv width]
  std::vector<float> router_logits, topk_weights;  // MoE: [T, experts], [T, top-k]
  std::vector<int32_t> topk_idx;                   // [T, top-k]
};

}  // namespace moeserve::model
