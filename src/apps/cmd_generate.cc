// moeserve generate: run prompts through the engine offline and print the continuations. The same
// engine, scheduler and sampler as `moeserve serve`, so both give the same tokens.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "apps/command_registry.h"
#include "apps/model_options.h"
#include "apps/model_session.h"
#include "apps/npy.h"
#include "core/check.h"
#include "engine/llm_engine.h"
#include "engine/prompt_logits.h"
#include "tokenizer/tokenizer.h"

namespace moeserve::apps {
namespace {

struct GenerateOptions {
  ModelOptions model;
  ParallelOptions parallel;
  std::vector<std::string> prompt_ids;
  std::vector<std::string> prompts;  // text, tokenized with the model's tokenizer
  engine::SamplingParams params;
  std::string output_format = "text";
  std::string logits_out;
  std::string kv_cache_dtype = "auto";
};

// Collects one request's tokens.
class CollectSink final : public engine::RequestSink {
 public:
  std::optional<std::string> OnOutput(const engine::EngineOutput& out) override {
    tokens.insert(tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
    reason = out.reason;
    return std::nullopt;
  }
  std::vector<int32_t> tokens;
  engine::FinishReason reason = engine::FinishReason::kNone;
};

int RunGenerate(GenerateOptions& o) {
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& s : o.prompt_ids) prompts.push_back(ParseIdList(s));
  std::optional<tokenizer::Tokenizer> tok;
  if (!o.prompts.empty()) {
    // As vLLM's completions: the tokenizer's own special tokens (BOS) are added.
    tok = tokenizer::Tokenizer::FromModelDir(o.model.model_dir);
    for (const auto& text : o.prompts) prompts.push_back(tok->Encode(text));
  }
  if (prompts.empty()) Fail("give --prompt TEXT or --prompt-ids 1,2,3");

  const DType ec_dtype = ParseKvCacheDtype(o.kv_cache_dtype);
  auto session = ModelSession::Open(o.model, o.parallel);
  if (session->is_worker()) return 0;
  model::Model* model = &session->model();
  const auto& cfg = model->config();
  if (!o.logits_out.empty()) {
    const auto logits = engine::ComputePromptLogits(*model, prompts, ec_dtype);
    WriteNpyF32(o.logits_out, logits.data(), logits.size() / cfg.vocab_size, cfg.vocab_size);
  }

  // A cache exactly large enough for every sequence at once: generation never preempts.
  engine::EngineConfig ec;
  ec.kv_cache_dtype = ec_dtype;
  auto& sc = ec.scheduler;
  sc.eos_token_ids = cfg.eos_token_ids;
  sc.max_model_len = 0;
  size_t total_blocks = 0;
  for (const auto& p : prompts) {
    const size_t len = p.size() + static_cast<size_t>(std::max(o.params.max_tokens, 0));
    sc.max_model_len = std::max(sc.max_model_len, len);
    total_blocks += (len + sc.block_size - 1) / sc.block_size;
  }
  sc.num_kv_blocks = std::max<size_t>(total_blocks, 1);
  engine::LLMEngine eng(*model, ec, session->context());
  std::vector<std::shared_ptr<CollectSink>> sinks;
  for (size_t i = 0; i < prompts.size(); ++i) {
    sinks.push_back(std::make_shared<CollectSink>());
    engine::SamplingParams p = o.params;
    if (p.seed) p.seed = *p.seed + i;  // distinct streams for distinct prompts
    if (std::string e = eng.AddRequest(i, prompts[i], p, sinks.back()); !e.empty())
      Fail("prompt ", i, ": ", e);
  }
  eng.RunUntilIdle();
  for (const auto& sink : sinks) {
    std::string ids;
    for (size_t i = 0; i < sink->tokens.size(); ++i)
      ids += (i ? ", " : "") + std::to_string(sink->tokens[i]);
    const std::string text = tok ? tok->Decode(sink->tokens, /*skip_special_tokens=*/true) : "";
    if (o.output_format == "json") {
      nlohmann::json j = {{"token_ids", sink->tokens},
                          {"finish_reason", engine::FinishReasonName(sink->reason)}};
      if (tok) j["text"] = text;
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      std::printf("%s\n", tok ? text.c_str() : ids.c_str());
    }
  }
  return 0;
}

CommandRegistration reg{
    "generate", "Generate continuations of prompts offline (greedy by default)",
    [](CLI::App& sub) -> CommandAction {
      auto o = std::make_shared<GenerateOptions>();
      o->params.temperature = 0.0f;
      o->params.max_tokens = 16;
      AddModelOptions(sub, o->model, BundledModelDir());
      AddParallelOptions(sub, o->parallel);
      AddKvCacheDtypeOption(sub, o->kv_cache_dtype);
      sub.add_option("--prompt-ids", o->prompt_ids,
                     "Comma-separated prompt token ids; repeat for several sequences (batched)");
      sub.add_option("--prompt", o->prompts,
                     "Prompt text (tokenized with the model's tokenizer; the continuation is "
                     "printed as text); repeat for several");
      sub.add_option("--max-tokens", o->params.max_tokens, "Tokens to generate per prompt")
          ->capture_default_str();
      sub.add_option("--temperature", o->params.temperature, "Sampling temperature (0 = greedy)")
          ->capture_default_str();
      sub.add_option("--top-k", o->params.top_k, "Sample from the k most likely tokens (0 = off)");
      sub.add_option("--top-p", o->params.top_p, "Nucleus sampling mass");
      sub.add_option("--seed", o->params.seed, "Random seed for sampling");
      sub.add_flag("--ignore-eos", o->params.ignore_eos,
                   "Do not stop at the end-of-sequence token");
      sub.add_option("--output-format", o->output_format, "text or json")
          ->check(CLI::IsMember({"text", "json"}))
          ->capture_default_str();
      sub.add_option("--logits-out", o->logits_out,
                     "Write float32 logits of every prompt position, [T, vocab], to this .npy");
      return [o] { return RunGenerate(*o); };
    }};

}  // namespace
}  // namespace moeserve::apps
