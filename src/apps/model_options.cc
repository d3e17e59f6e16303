#include "apps/model_options.h"

#include "core/check.h"

namespace moeserve::apps {

std::string BundledModelDir() {
  return std::string(MOESERVE_SOURCE_DIR) + "/models/minimax-m2-tiny";
}

void AddModelOptions(CLI::App& app, ModelOptions& opts, const std::string& default_model) {
  auto* m = app.add_option("--model", opts.model_dir,
                           "Model folder (Hugging Face layout: config.json, *.safetensors, ...)");
  if (default_model.empty()) {
    m->required();
  } else {
    opts.model_dir = default_model;
    m->default_str(default_model);
  }
  app.add_option("--threads", opts.threads, "Worker threads (default: all cores)");
  app.add_option("--activation-dtype", opts.activation_dtype,
                 "Inputs of MXFP4 linear layers: int8 (weights repacked at load for int8 dot "
                 "products, activations quantized per 32 values), bf16 (bf16 activations, "
                 "weights used from the mmap'd checkpoint without repacking), or auto (= int8: "
                 "faster on every ISA, within GSM8K's standard error of bf16)")
      ->check(CLI::IsMember({"auto", "bf16", "int8"}))
      ->capture_default_str();
  app.add_option("--weight-layout", opts.weight_layout,
                 "bf16 and FP8 linear weights: auto (bf16 repacked at load into 16-row panels on "
                 "AVX2, AVX-512 BF16 and AMX, FP8-block too on AVX2 and AMX: the same bytes, no "
                 "per-call packing; on AVX-512 BF16 without AMX FP8-block rows are copied onto "
                 "huge pages), or checkpoint (views into the mmap'd checkpoint, nothing "
                 "repacked)")
      ->check(CLI::IsMember({"auto", "checkpoint"}))
      ->capture_default_str();
}

void AddKvCacheDtypeOption(CLI::App& app, std::string& value) {
  app.add_option("--kv-cache-dtype", value,
                 "KV cache element type: auto (= bf16), bf16, fp8 (e4m3 with a scale per token "
                 "and kv head: about half the memory per token)")
      ->capture_default_str();
}

DType ParseKvCacheDtype(const std::string& value) {
  if (value == "auto" || value == "bf16" || value == "bfloat16") return DType::kBF16;
  if (value == "fp8" || value == "fp8_e4m3") return DType::kF8E4M3;
  Fail("--kv-cache-dtype \"", value, "\" is not supported (auto, bf16, fp8, fp8_e4m3)");
}

std::vector<int32_t> ParseIdList(const std::string& s) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const std::string item =
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    try {
      size_t used = 0;
      const long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      Fail("invalid token id \"", item, "\" in \"", s, "\"");
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ids;
}

}  // namespace moeserve::apps
