// Architectures by their config.json `architectures[0]` name. Adding one = one file that defines
// an Architecture, plus its line in registry.cc.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loader/checkpoint.h"
#include "loader/json_config.h"
#include "model/model.h"
#include "model/weights.h"

namespace moeserve::model {

struct Architecture {
  std::string name;  // e.g. "MiniMaxM2ForCausalLM"
  // Validates config.json; refuses settings the engine cannot honour with a message.
  std::function<ModelConfig(const loader::JsonConfig&)> parse_config;
  // Declares which checkpoint tensors are present but unused (e.g. MTP layers).
  std::function<void(const ModelConfig&, loader::StrictLoader&)> ignore_rules;
  std::function<std::unique_ptr<Model>(const ModelConfig&, WeightReader&, Parallelism, RunContext)>
      build;
};

const std::vector<Architecture>& Architectures();
const Architecture& FindArchitecture(const loader::JsonConfig& config);

// config.json of `dir` -> ModelConfig (no weights touched).
ModelConfig LoadModelConfig(const std::string& dir);

// Loads `dir` strictly for this rank. `ctx` must outlive the model.
std::unique_ptr<Model> LoadModel(const std::string& dir, Parallelism parallel, RunContext ctx,
                                 LoadOptions options = {});

// Shared config.json parsing for the keys every architecture spells the same way.
void ParseCommonConfig(const loader::JsonConfig& j, ModelConfig& c);

}  // namespace moeserve::model
