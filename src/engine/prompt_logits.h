// Logits of every prompt position, for scoring and for comparing against another implementation
// (`moeserve generate --logits-out`). Uses a private KV pool; independent of any running engine.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"

namespace moeserve::engine {

// Row-major [Σ prompt lengths, vocab]: the prompts' rows in order, all in one forward step.
std::vector<float> ComputePromptLogits(model::Model& model,
                                       const std::vector<std::vector<int32_t>>& prompts,
                                       DType kv_dtype = DType::kBF16);

}  // namespace moeserve::engine
