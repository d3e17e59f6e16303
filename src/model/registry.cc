#include "model/registry.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "core/check.h"
#include "core/log.h"

namespace moeserve::model {

// One line per architecture; each is defined in its own file.
Architecture MiniMaxM2Architecture();
Architecture Qwen3MoeArchitecture();

const std::vector<Architecture>& Architectures() {
  static const std::vector<Architecture> archs = {MiniMaxM2Architecture(), Qwen3MoeArchitecture()};
  return archs;
}

const Architecture& FindArchitecture(const loader::JsonConfig& j) {
  const auto names = j.GetOr<std::vector<std::string>>("architectures", {});
  if (names.empty()) Fail(j.source(), ": no \"architectures\" list");
  try {
    return FindArchitecture(names[0]);
  } catch (const Error& e) {
    Fail(j.source(), ": ", e.what());
  }
}

const Architecture& FindArchitecture(const std::string& name) {
  for (const Architecture& a : Architectures())
    if (a.name == name) return a;
  std::string known;
  for (const Architecture& a : Architectures()) known += " " + a.name;
  Fail("unsupported architecture ", name, " (supported:", known, ")");
}

void ParseCommonConfig(const loader::JsonConfig& j, ModelConfig& c) {
  c.architecture = j.Get<std::vector<std::string>>("architectures")[0];
  c.hidden_size = j.Get<size_t>("hidden_size");
  c.num_layers = j.Get<size_t>("num_hidden_layers");
  c.num_heads = j.Get<size_t>("num_attention_heads");
  c.num_kv_heads = j.GetOr<size_t>("num_key_value_heads", c.num_heads);
  c.head_dim = j.GetOr<size_t>("head_dim", c.num_heads ? c.hidden_size / c.num_heads : 0);
  c.vocab_size = j.Get<size_t>("vocab_size");
  c.rope_theta = j.GetOr<float>("rope_theta", 10000.0f);
  c.rms_norm_eps = j.GetOr<float>("rms_norm_eps", 1e-6f);
  c.max_position_embeddings = j.GetOr<size_t>("max_position_embeddings", 32768);
  c.tie_word_embeddings = j.GetOr<bool>("tie_word_embeddings", false);
  c.bos_token_id = j.GetOptional<int32_t>("bos_token_id");
  if (j.Has("eos_token_id")) {
    const auto& eos = j.json()["eos_token_id"];
    c.eos_token_ids =
        eos.is_array() ? eos.get<std::vector<int32_t>>() : std::vector<int32_t>{eos.get<int32_t>()};
  }
  if (j.Has("rope_scaling"))
    Fail(j.source(), ": rope_scaling ", j.json()["rope_scaling"].dump(), " is not supported");
  if (j.GetOr<bool>("attention_bias", false))
    Fail(j.source(), ": attention_bias = true is not supported");
  if (c.hidden_size == 0 || c.num_layers == 0 || c.num_heads == 0 || c.num_kv_heads == 0 ||
      c.head_dim == 0 || c.vocab_size == 0)
    Fail(j.source(), ": sizes must be positive");
  if (c.num_heads % c.num_kv_heads != 0)
    Fail(j.source(), ": num_attention_heads ", c.num_heads,
         " is not a multiple of num_key_value_heads ", c.num_kv_heads);
  if (c.head_dim % 2 != 0) Fail(j.source(), ": head_dim ", c.head_dim, " must be even");
}

ModelConfig LoadModelConfig(const std::string& dir) {
  const auto j =
      loader::JsonConfig::FromFile((std::filesystem::path(dir) / "config.json").string());
  return FindArchitecture(j).parse_config(j);
}

namespace {

// Keeps the mmap'd checkpoint alive as long as the model whose weights point into it.
class CheckpointBackedModel final : public Model {
 public:
  CheckpointBackedModel(std::unique_ptr<loader::Checkpoint> ckpt, RepackedStore repacked,
                        std::unique_ptr<Model> model)
      : ckpt_(std::move(ckpt)), repacked_(std::move(repacked)), model_(std::move(model)) {}
  const ModelConfig& config() const override { return model_->config(); }
  KvLayout kv_layout() const override { return model_->kv_layout(); }
  size_t DecodeBytesPerToken() const override { return model_->DecodeBytesPerToken(); }
  size_t WeightBytes() const override { return model_->WeightBytes(); }
  void Forward(const Batch& b, KvStorage& kv, float* logits) override {
    model_->Forward(b, kv, logits);
  }

 private:
  std::unique_ptr<loader::Checkpoint> ckpt_;
  RepackedStore repacked_;  // weights repacked at load, also pointed into
  std::unique_ptr<Model> model_;
};

}  // namespace

std::unique_ptr<Model> LoadModel(const std::string& dir, Parallelism parallel, RunContext ctx,
                                 LoadOptions options) {
  const Shard shard = parallel.shard;
  const auto j =
      loader::JsonConfig::FromFile((std::filesystem::path(dir) / "config.json").string());
  const Architecture& arch = FindArchitecture(j);
  const ModelConfig config = arch.parse_config(j);
  auto ckpt = std::make_unique<loader::Checkpoint>(dir);
  loader::StrictLoader strict(*ckpt);
  if (arch.ignore_rules) arch.ignore_rules(config, strict);
  if (shard.rank == 0) strict.ShowProgress(isatty(fileno(stderr)) != 0);
  const loader::QuantConfig quant = loader::ParseQuantConfig(j);
  if (quant.method != loader::QuantMethod::kNone)
    LogInfo("quantized checkpoint: ", quant.Describe(options.int8_activations));
  WeightReader weights(strict, quant, options);
  const auto t0 = std::chrono::steady_clock::now();
  auto model = arch.build(config, weights, parallel, ctx);
  strict.Finish();
  if (weights.repacked_bytes() > 0)
    LogInfo("repacked ", weights.repacked_bytes() >> 20, " MiB of weights for the kernels (",
            weights.RepackedSummary(), "; the checkpoint's own bytes: ",
            weights.repacked_source_bytes() >> 20, " MiB); weights loaded in ",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), " s");
  LogInfo("loaded ", config.architecture, " from ", dir, ": ", config.num_layers, " layers, ",
          config.num_experts, " experts (top ", config.num_experts_per_token, "), ",
          model->WeightBytes() / (1 << 20), " MiB of weights on rank ", shard.rank, "/", shard.size,
          parallel.expert_parallel ? " (expert parallel)" : "");
  return std::make_unique<CheckpointBackedModel>(std::move(ckpt), weights.TakeRepacked(),
                                                 std::move(model));
}

}  // namespace moeserve::model
