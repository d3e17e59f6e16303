#include "loader/quant_config.h"

#include <fnmatch.h>

#include "core/check.h"

namespace moeserve::loader {
namespace {

// vLLM-style module skipping: an entry names a module or a dotted suffix of its name ("gate"
// matches "model.layers.0.block_sparse_moe.gate", not "...mlp.gate_proj").
bool MatchesModule(const std::string& module, const std::string& entry) {
  if (module == entry) return true;
  if (module.size() > entry.size() &&
      module.compare(module.size() - entry.size(), entry.size(), entry) == 0 &&
      module[module.size() - entry.size() - 1] == '.')
    return true;
  return module.find("." + entry + ".") != std::string::npos || module.rfind(entry + ".", 0) == 0;
}

void ParseFp8(const nlohmann::json& q, const std::string& src, QuantConfig& c) {
  c.method = QuantMethod::kFp8Block;
  const std::string fmt = q.value("fmt", "float8_e4m3fn");
  if (fmt != "float8_e4m3fn" && fmt != "e4m3")
    Fail(src, ": quantization_config.fmt \"", fmt, "\" is not supported (only float8_e4m3fn)");
  if (!q.contains("weight_block_size") || q["weight_block_size"] != nlohmann::json({128, 128}))
    Fail(src, ": quantization_config.weight_block_size ",
         q.contains("weight_block_size") ? q["weight_block_size"].dump() : "(absent)",
         " is not supported (only [128, 128])");
  const std::string scheme = q.value("activation_scheme", "dynamic");
  if (scheme != "dynamic")
    Fail(src, ": quantization_config.activation_scheme \"", scheme, "\" is not supported");
  if (q.contains("modules_to_not_convert") && q["modules_to_not_convert"].is_array())
    c.not_converted = q["modules_to_not_convert"].get<std::vector<std::string>>();
}

void CheckMxfp4Spec(const nlohmann::json& w, const std::string& src, const std::string& where) {
  auto need = [&](const char* key, const nlohmann::json& want) {
    if (!w.contains(key) || w[key] != want)
      Fail(src, ": quantization_config.", where, ".", key, " is ",
           w.contains(key) ? w[key].dump() : "absent", ", only ", want.dump(), " is supported");
  };
  need("dtype", "fp4");
  need("qscheme", "per_group");
  need("group_size", 32);
  need("scale_format", "e8m0");
}

void ParseQuark(const nlohmann::json& q, const std::string& src, QuantConfig& c) {
  c.method = QuantMethod::kMxfp4;
  if (!q.contains("global_quant_config") || !q["global_quant_config"].contains("weight"))
    Fail(src, ": quantization_config.global_quant_config.weight is missing");
  const auto& g = q["global_quant_config"];
  CheckMxfp4Spec(g["weight"], src, "global_quant_config.weight");
  if (g.contains("input_tensors") && !g["input_tensors"].is_null())
    c.checkpoint_quantizes_activations = true;
  if (q.contains("layer_quant_config") && !q["layer_quant_config"].empty())
    Fail(src, ": quantization_config.layer_quant_config overrides are not supported");
  if (q.contains("exclude") && q["exclude"].is_array())
    c.exclude = q["exclude"].get<std::vector<std::string>>();
  if (q.contains("export")) {
    const std::string pack = q["export"].value("pack_method", "reorder");
    if (pack != "reorder")
      Fail(src, ": quantization_config.export.pack_method \"", pack, "\" is not supported");
  }
}

}  // namespace

bool QuantConfig::IsQuantized(const std::string& module) const {
  switch (method) {
    case QuantMethod::kNone:
      return false;
    case QuantMethod::kFp8Block:
      for (const auto& e : not_converted)
        if (MatchesModule(module, e)) return false;
      return true;
    case QuantMethod::kMxfp4:
      for (const auto& e : exclude)
        if (module == e || ::fnmatch(e.c_str(), module.c_str(), 0) == 0) return false;
      return true;
  }
  return false;
}

std::string QuantConfig::Describe(bool int8_activations) const {
  switch (method) {
    case QuantMethod::kNone:
      return "bf16";
    case QuantMethod::kFp8Block:
      return "fp8 e4m3, 128x128 block scales (weight-only; activations bf16)";
    case QuantMethod::kMxfp4:
      return std::string("mxfp4 e2m1, e8m0 scale per 32 (activations ") +
             (int8_activations ? "int8 per 32 values" : "bf16") +
             (checkpoint_quantizes_activations
                  ? "; the checkpoint's dynamic MXFP4 activations are not applied)"
                  : ")");
  }
  return "?";
}

QuantConfig ParseQuantConfig(const JsonConfig& config) {
  QuantConfig c;
  if (!config.Has("quantization_config")) return c;
  const auto& q = config.json()["quantization_config"];
  if (!q.is_object()) Fail(config.source(), ": quantization_config is not an object");
  const std::string method = q.value("quant_method", "");
  if (method == "fp8") {
    ParseFp8(q, config.source(), c);
  } else if (method == "quark") {
    ParseQuark(q, config.source(), c);
  } else {
    Fail(config.source(), ": quantization_config.quant_method \"", method,
         "\" is not supported (supported: fp8 with 128x128 blocks, quark mxfp4)");
  }
  return c;
}

}  // namespace moeserve::loader
