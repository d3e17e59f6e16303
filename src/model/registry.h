// Architectures by their config.json `architectures[0]` name. Adding one = one file that defines
// an Architecture, plus its line in registry.cc. Everything model-specific that other layers need
// (default parsers for serve, the linears quantize rewrites) is a field here, so no layer above
// keeps a per-model table.
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

// The expert linears `moeserve quantize` rewrites, by checkpoint name relative to
// "model.layers.N." (attention projections are the shared blocks' q/k/v/o_proj).
struct QuantizableLinears {
  std::string experts;                     // e.g. "block_sparse_moe.experts."
  std::vector<std::string> up, down;       // [inter, hidden] and [hidden, inter] expert weights
  std::vector<std::string> mxfp4_exclude;  // Quark's `exclude` patterns for an MXFP4 export
};

struct Architecture {
  std::string name;  // e.g. "MiniMaxM2ForCausalLM"
  // Validates config.json; refuses settings the engine cannot honour with a message.
  std::function<ModelConfig(const loader::JsonConfig&)> parse_config;
  // Declares which checkpoint tensors are present but unused (e.g. MTP layers).
  std::function<void(const ModelConfig&, loader::StrictLoader&)> ignore_rules;
  std::function<std::unique_ptr<Model>(const ModelConfig&, WeightReader&, Parallelism, RunContext)>
      build;
  // vLLM's parser names for the family's replies (chat/parser_registry.h): what
  // `--reasoning-parser auto` / `--tool-call-parser auto` pick.
  std::string default_reasoning_parser = "none";
  std::string default_tool_call_parser = "none";
  QuantizableLinears quantizable;
};

const std::vector<Architecture>& Architectures();
const Architecture& FindArchitecture(const loader::JsonConfig& config);
// By config.json name (ModelConfig::architecture); throws naming the supported ones.
const Architecture& FindArchitecture(const std::string& name);

// config.json of `dir` -> ModelConfig (no weights touched).
ModelConfig LoadModelConfig(const std::string& dir);

// Loads `dir` strictly for this rank. `ctx` must outlive the model.
std::unique_ptr<Model> LoadModel(const std::string& dir, Parallelism parallel, RunContext ctx,
                                 LoadOptions options = {});

// Shared config.json parsing for the keys every architecture spells the same way.
void ParseCommonConfig(const loader::JsonConfig& j, ModelConfig& c);

}  // namespace moeserve::model
