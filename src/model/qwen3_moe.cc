// Qwen3-MoE (Qwen3MoeForCausalLM): per-head q/k RMSNorm before RoPE, full rotary, softmax routing
// with optional renormalisation of the top-k probabilities (norm_topk_prob).
#include "core/check.h"
#include "model/moe_transformer.h"
#include "model/registry.h"

namespace moeserve::model {
namespace {

ModelConfig ParseQwen3MoeConfig(const loader::JsonConfig& j) {
  ModelConfig c;
  ParseCommonConfig(j, c);
  c.expert_intermediate_size = j.Get<size_t>("moe_intermediate_size");
  c.num_experts = j.Get<size_t>("num_experts");
  c.num_experts_per_token = j.Get<size_t>("num_experts_per_tok");
  c.rotary_dim = c.head_dim;
  c.routing = Routing::kSoftmax;
  c.renormalize_topk = j.GetOr<bool>("norm_topk_prob", false);
  c.qk_norm = QkNorm::kPerHead;
  if (j.GetOr<size_t>("decoder_sparse_step", 1) != 1)
    Fail(j.source(),
         ": decoder_sparse_step != 1 (dense layers between MoE layers) is not supported");
  if (!j.GetOr<std::vector<int>>("mlp_only_layers", {}).empty())
    Fail(j.source(), ": mlp_only_layers (dense MLP layers) are not supported");
  if (j.GetOr<bool>("use_sliding_window", false))
    Fail(j.source(), ": use_sliding_window = true is not supported");
  if (c.num_experts == 0 || c.num_experts_per_token == 0 ||
      c.num_experts_per_token > c.num_experts || c.expert_intermediate_size == 0)
    Fail(j.source(), ": num_experts_per_tok ", c.num_experts_per_token,
         " must be in [1, num_experts ", c.num_experts, "]");
  return c;
}

}  // namespace

Architecture Qwen3MoeArchitecture() {
  Architecture a;
  a.name = "Qwen3MoeForCausalLM";
  a.parse_config = ParseQwen3MoeConfig;
  a.build = [](const ModelConfig& c, WeightReader& w, Parallelism parallel, RunContext ctx) {
    LayerNames names;
    names.moe = {"mlp.gate.weight", "", "mlp.experts.", "gate_proj.weight", "up_proj.weight",
                 "down_proj.weight"};
    return std::make_unique<MoeTransformer>(c, names, w, parallel, ctx);
  };
  // Qwen3's <tool_call> blocks hold JSON (Hermes); Qwen3-Coder's hold <function=...> XML, which
  // the same parser reads.
  a.default_reasoning_parser = "qwen3";
  a.default_tool_call_parser = "hermes";
  a.quantizable = {"mlp.experts.",
                   {"gate_proj", "up_proj"},
                   {"down_proj"},
                   {"lm_head", "*mlp.gate", "*self_attn*"}};
  return a;
}

}  // namespace moeserve::model
