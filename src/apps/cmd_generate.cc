// moeserve generate: run prompts through the model offline and print the continuations.
#include <cmath>
#include <cstdio>
#include <random>

#include "apps/command_registry.h"
#include "apps/model_options.h"
#include "apps/npy.h"
#include "cache/kv_pool.h"
#include "core/check.h"
#include "dist/communicator.h"
#include "model/registry.h"

namespace moeserve::apps {
namespace {

struct GenerateOptions {
  ModelOptions model;
  std::vector<std::string> prompt_ids;
  int max_tokens = 16;
  float temperature = 0.0f;
  uint64_t seed = 0;
  bool ignore_eos = false;
  std::string output_format = "text";
  std::string logits_out;
};

int32_t Argmax(const float* x, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;  // strict: ties keep the lowest id
  return static_cast<int32_t>(best);
}

int32_t SampleSoftmax(const float* x, size_t n, float temperature, std::mt19937_64& rng) {
  const float m = x[Argmax(x, n)];
  std::vector<double> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = std::exp((x[i] - m) / temperature);
  return static_cast<int32_t>(std::discrete_distribution<size_t>(p.begin(), p.end())(rng));
}

int RunGenerate(const GenerateOptions& o) {
  if (o.max_tokens < 0) Fail("--max-tokens must be >= 0");
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& s : o.prompt_ids) prompts.push_back(ParseIdList(s));
  if (prompts.empty()) Fail("give at least one --prompt-ids");
  for (const auto& p : prompts)
    if (p.empty()) Fail("empty prompt");

  ThreadPool pool(o.model.threads);
  dist::SingleRankCommunicator comm;
  auto model = model::LoadModel(o.model.model_dir, model::Shard{}, {&pool, &comm});
  const auto& cfg = model->config();
  const size_t vocab = cfg.vocab_size, block_size = 16;

  // Each sequence gets a contiguous run of blocks large enough for prompt + continuation.
  size_t blocks_per_seq = 0;
  for (const auto& p : prompts)
    blocks_per_seq = std::max(blocks_per_seq, (p.size() + o.max_tokens + block_size) / block_size);
  cache::KvPool kv(model->kv_layout(), block_size, blocks_per_seq * prompts.size());
  std::vector<std::vector<int32_t>> tables(prompts.size());
  for (size_t s = 0; s < prompts.size(); ++s)
    for (size_t b = 0; b < blocks_per_seq; ++b)
      tables[s].push_back(static_cast<int32_t>(s * blocks_per_seq + b));

  // Prefill: every prompt in one batch.
  model::Batch batch;
  std::vector<int32_t> last_rows;
  for (size_t s = 0; s < prompts.size(); ++s) {
    batch.seqs.push_back({prompts[s].size(), 0, tables[s]});
    for (size_t i = 0; i < prompts[s].size(); ++i) {
      if (!o.logits_out.empty() || i + 1 == prompts[s].size())
        batch.logits_rows.push_back(static_cast<int32_t>(batch.token_ids.size()));
      batch.token_ids.push_back(prompts[s][i]);
    }
    last_rows.push_back(static_cast<int32_t>(batch.token_ids.size() - 1));
  }
  std::vector<float> logits(batch.logits_rows.size() * vocab);
  model->Forward(batch, kv, logits.data());
  if (!o.logits_out.empty()) WriteNpyF32(o.logits_out, logits.data(), batch.logits_rows.size(), vocab);

  std::mt19937_64 rng(o.seed);
  auto pick = [&](const float* row) {
    return o.temperature <= 0 ? Argmax(row, vocab) : SampleSoftmax(row, vocab, o.temperature, rng);
  };
  auto is_eos = [&](int32_t t) {
    return !o.ignore_eos &&
           std::find(cfg.eos_token_ids.begin(), cfg.eos_token_ids.end(), t) != cfg.eos_token_ids.end();
  };
  std::vector<std::vector<int32_t>> outputs(prompts.size());
  std::vector<bool> done(prompts.size(), o.max_tokens == 0);
  for (size_t s = 0; s < prompts.size() && o.max_tokens > 0; ++s) {
    const size_t row = std::find(batch.logits_rows.begin(), batch.logits_rows.end(), last_rows[s]) -
                       batch.logits_rows.begin();
    outputs[s].push_back(pick(logits.data() + row * vocab));
    done[s] = is_eos(outputs[s].back()) || outputs[s].size() >= static_cast<size_t>(o.max_tokens);
  }
  // Decode: one token per unfinished sequence per step.
  for (;;) {
    model::Batch step;
    std::vector<size_t> active;
    for (size_t s = 0; s < prompts.size(); ++s) {
      if (done[s]) continue;
      active.push_back(s);
      step.seqs.push_back({1, prompts[s].size() + outputs[s].size() - 1, tables[s]});
      step.logits_rows.push_back(static_cast<int32_t>(step.token_ids.size()));
      step.token_ids.push_back(outputs[s].back());
    }
    if (active.empty()) break;
    logits.resize(active.size() * vocab);
    model->Forward(step, kv, logits.data());
    for (size_t i = 0; i < active.size(); ++i) {
      const size_t s = active[i];
      outputs[s].push_back(pick(logits.data() + i * vocab));
      done[s] = is_eos(outputs[s].back()) || outputs[s].size() >= static_cast<size_t>(o.max_tokens);
    }
  }
  for (const auto& out : outputs) {
    std::string ids;
    for (size_t i = 0; i < out.size(); ++i) ids += (i ? ", " : "") + std::to_string(out[i]);
    if (o.output_format == "json") {
      std::printf("{\"token_ids\": [%s]}\n", ids.c_str());
    } else {
      std::printf("%s\n", ids.c_str());
    }
  }
  return 0;
}

CommandRegistration reg{
    "generate", "Generate continuations of prompts offline (greedy by default)",
    [](CLI::App& sub) -> CommandAction {
      auto o = std::make_shared<GenerateOptions>();
      AddModelOptions(sub, o->model);
      sub.add_option("--prompt-ids", o->prompt_ids,
                     "Comma-separated prompt token ids; repeat for several sequences (batched)")
          ->required();
      sub.add_option("--max-tokens", o->max_tokens, "Tokens to generate per prompt")
          ->capture_default_str();
      sub.add_option("--temperature", o->temperature, "Sampling temperature (0 = greedy)")
          ->capture_default_str();
      sub.add_option("--seed", o->seed, "Random seed for sampling")->capture_default_str();
      sub.add_flag("--ignore-eos", o->ignore_eos, "Do not stop at the end-of-sequence token");
      sub.add_option("--output-format", o->output_format, "text or json")
          ->check(CLI::IsMember({"text", "json"}))
          ->capture_default_str();
      sub.add_option("--logits-out", o->logits_out,
                     "Write float32 logits of every prompt position, [T, vocab], to this .npy");
      return [o] { return RunGenerate(*o); };
    }};

}  // namespace
}  // namespace moeserve::apps
