// The small shared pieces: RMSNorm with its weight, token embedding, final norm + LM head.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/weights.h"
#include "model/model.h"
#include "model/weights.h"

namespace moeserve::model {

class RmsNormBlock {
 public:
  RmsNormBlock(WeightReader& weights, const std::string& name, size_t width, float eps);
  // y [rows, width] = rmsnorm(x); y may alias x. Rows split over ctx's threads.
  void Forward(const float* x, size_t rows, float* y, const RunContext& ctx) const;

 private:
  std::vector<float> weight_;
  float eps_;
};

class EmbeddingBlock {
 public:
  EmbeddingBlock(WeightReader& weights, const std::string& name, size_t vocab, size_t hidden);
  // out [T, hidden] = rows of the table. Throws moeserve::Error on an id outside the vocab.
  void Forward(const std::vector<int32_t>& ids, float* out) const;
  const kernels::WeightMatrix& table() const { return table_; }

 private:
  kernels::WeightMatrix table_;
};

class LmHeadBlock {
 public:
  // Reads `lm_head.weight`, or reuses the embedding table when tied.
  LmHeadBlock(WeightReader& weights, const ModelConfig& config, const EmbeddingBlock& embedding);
  // logits [rows, vocab] for the given rows of h [*, hidden] (after the final norm).
  void Forward(const float* h, const std::vector<int32_t>& rows, float* logits,
               const RunContext& ctx);
  size_t DecodeBytes() const { return BytesOf(weight_); }

 private:
  const ModelConfig& config_;
  RmsNormBlock final_norm_;
  kernels::WeightMatrix weight_;
  std::vector<float> gathered_;
};

}  // namespace moeserve::model
