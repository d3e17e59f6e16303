// The part of a model::Model that the engine tests' fake models share: one layer, one kv head of
// 8 dimensions (bf16 KV), no weights. A test's model derives from it and supplies Forward.
#pragma once

#include <cstddef>

#include "model/model.h"

namespace moeserve::engine {

class TinyModel : public model::Model {
 public:
  explicit TinyModel(size_t vocab_size) {
    config_.vocab_size = vocab_size;
    config_.num_layers = 1;
    config_.num_kv_heads = 1;
    config_.head_dim = 8;
  }
  const model::ModelConfig& config() const override { return config_; }
  model::KvLayout kv_layout() const override { return {1, 1, 8, DType::kBF16}; }
  size_t DecodeBytesPerToken() const override { return 0; }
  size_t WeightBytes() const override { return 0; }

 protected:
  model::ModelConfig config_;
};

}  // namespace moeserve::engine
