// MiniMax-M2 / M2.1 / M2.5 (MiniMaxM2ForCausalLM): full-width QK-norm, partial NeoX RoPE, sigmoid
// routing with an expert-choice correction bias. The math is ../shared/MINIMAX-M2.md.
#include <regex>

#include "core/check.h"
#include "model/moe_transformer.h"
#include "model/registry.h"

namespace moeserve::model {
namespace {

ModelConfig ParseMiniMaxM2Config(const loader::JsonConfig& j) {
  ModelConfig c;
  ParseCommonConfig(j, c);
  c.expert_intermediate_size = j.Get<size_t>("intermediate_size");
  c.num_experts = j.Get<size_t>("num_local_experts");
  c.num_experts_per_token = j.Get<size_t>("num_experts_per_tok");
  if (j.Has("rotary_dim")) {
    c.rotary_dim = j.Get<size_t>("rotary_dim");
  } else if (j.Has("partial_rotary_factor")) {
    c.rotary_dim = static_cast<size_t>(j.Get<double>("partial_rotary_factor") * c.head_dim + 0.5);
  } else {
    c.rotary_dim = c.head_dim;
  }
  if (c.rotary_dim == 0 || c.rotary_dim > c.head_dim || c.rotary_dim % 2)
    Fail(j.source(), ": rotary_dim ", c.rotary_dim, " must be even and in (0, head_dim ",
         c.head_dim, "]");
  const std::string scoring = j.GetOr<std::string>("scoring_func", "sigmoid");
  if (scoring != "sigmoid")
    Fail(j.source(), ": scoring_func \"", scoring, "\" is not supported (only \"sigmoid\")");
  c.routing = Routing::kSigmoidWithBias;
  c.routing_bias = j.GetOr<bool>("use_routing_bias", true);
  c.renormalize_topk = true;
  // Absent in the published configs; HF and vLLM then scale by 1.
  c.routed_scaling_factor = j.GetOr<float>("routed_scaling_factor", 1.0f);
  if (j.GetOr<bool>("use_qk_norm", true)) {
    const std::string type = j.GetOr<std::string>("qk_norm_type", "per_layer");
    if (type != "per_layer")
      Fail(j.source(), ": qk_norm_type \"", type, "\" is not supported (only \"per_layer\")");
    c.qk_norm = QkNorm::kFullWidth;
  }
  if (j.GetOr<size_t>("shared_intermediate_size", 0) != 0)
    Fail(j.source(), ": shared experts (shared_intermediate_size > 0) are not supported");
  if (j.Has("attn_type_list"))
    for (int t : j.Get<std::vector<int>>("attn_type_list"))
      if (t != 1) Fail(j.source(), ": attn_type_list has a non-full-attention layer (", t, ")");
  if (c.num_experts == 0 || c.num_experts_per_token == 0 ||
      c.num_experts_per_token > c.num_experts || c.expert_intermediate_size == 0)
    Fail(j.source(), ": num_experts_per_tok ", c.num_experts_per_token,
         " must be in [1, num_local_experts ", c.num_experts, "]");
  if (j.GetOr<bool>("use_mtp", false))
    c.num_extra_checkpoint_layers = j.GetOr<size_t>("num_mtp_modules", 0);
  return c;
}

// MTP modules are stored as layers num_hidden_layers.. (and a few top-level mtp tensors in some
// exports); serving does not use them.
void IgnoreMtpLayers(const ModelConfig& c, loader::StrictLoader& loader) {
  const size_t first_mtp = c.num_layers;
  static const std::regex layer_re(R"(^model\.layers\.(\d+)\.)");
  loader.Ignore("multi-token-prediction (MTP) layers >= num_hidden_layers",
                [first_mtp](const std::string& n) {
                  std::smatch m;
                  return std::regex_search(n, m, layer_re) && std::stoul(m[1].str()) >= first_mtp;
                });
}

LayerNames MiniMaxM2Names() {
  LayerNames n;
  n.moe = {"block_sparse_moe.gate.weight",
           "block_sparse_moe.e_score_correction_bias",
           "block_sparse_moe.experts.",
           "w1.weight",
           "w3.weight",
           "w2.weight"};
  return n;
}

}  // namespace

Architecture MiniMaxM2Architecture() {
  Architecture a;
  a.name = "MiniMaxM2ForCausalLM";
  a.parse_config = ParseMiniMaxM2Config;
  a.ignore_rules = IgnoreMtpLayers;
  a.build = [](const ModelConfig& c, WeightReader& w, Parallelism parallel, RunContext ctx) {
    LayerNames names = MiniMaxM2Names();
    if (!c.routing_bias) names.moe.bias.clear();
    return std::make_unique<MoeTransformer>(c, names, w, parallel, ctx);
  };
  a.default_reasoning_parser = "minimax_m2";
  a.default_tool_call_parser = "minimax_m2";
  a.quantizable = {"block_sparse_moe.experts.",
                   {"w1", "w3"},
                   {"w2"},
                   {"lm_head", "*block_sparse_moe.gate*", "*self_attn*"}};
  return a;
}

}  // namespace moeserve::model
