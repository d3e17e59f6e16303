// The architecture-neutral description of a model that the shared blocks are built from. Each
// architecture file parses its own config.json keys into it (see registry.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moeserve::model {

enum class QkNorm {
  kNone,
  kFullWidth,  // MiniMax-M2: one RMS over all heads of q (and of k), per token
  kPerHead,    // Qwen3: one RMS per head_dim slice
};

enum class Routing {
  kSigmoidWithBias,  // MiniMax-M2 / DeepSeek-V3: sigmoid, bias picks, unbiased weights
  kSoftmax,          // Qwen3-MoE / Mixtral
};

struct ModelConfig {
  std::string architecture;  // e.g. "MiniMaxM2ForCausalLM"
  size_t hidden_size = 0;
  size_t num_layers = 0;
  size_t num_heads = 0;
  size_t num_kv_heads = 0;
  size_t head_dim = 0;
  size_t rotary_dim = 0;  // == head_dim for full rotary
  float rope_theta = 10000.0f;
  float rms_norm_eps = 1e-6f;
  size_t vocab_size = 0;
  size_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;

  size_t num_experts = 0;
  size_t num_experts_per_token = 0;
  size_t expert_intermediate_size = 0;
  Routing routing = Routing::kSoftmax;
  bool renormalize_topk = true;
  float routed_scaling_factor = 1.0f;
  bool routing_bias = false;
  QkNorm qk_norm = QkNorm::kNone;

  // Checkpoint layers with index >= num_layers (MiniMax MTP modules) are present but unused.
  size_t num_extra_checkpoint_layers = 0;

  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;

  size_t q_width() const { return num_heads * head_dim; }
  size_t kv_width() const { return num_kv_heads * head_dim; }
};

}  // namespace moeserve::model
