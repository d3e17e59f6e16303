// Structured outputs through the sampler and the engine loop, on a fake model whose logits are a
// deterministic hash of (token, position): whatever the model "wants", every output must match
// the grammar, finish "stop" when the grammar ends, reproduce under a seed, survive preemption,
// and report logprobs of the masked distribution. Tokens are single bytes plus a few multi-byte
// ones and an EOS, so outputs decode by concatenation.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/llm_engine.h"
#include "grammar/earley.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "tiny_model.h"

namespace moeserve::engine {
namespace {

// Ids 0..255: bytes. Then multi-byte tokens, then EOS, "<think>", "</think>", and padding rows
// (the model's vocab is larger than the tokenizer's, as with real checkpoints).
struct TestVocab {
  std::vector<std::string> bytes;
  std::vector<bool> special;
  int32_t eos, think, end_think;
  size_t model_vocab;
  TestVocab() {
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, char(b)));
    for (const char* t :
         {"{\"", "\":", "\",", "true", "null", "ab", "é", " \"", "\"}", "12", ">{\""})
      bytes.push_back(t);
    special.assign(bytes.size(), false);
    auto add_special = [&](const char* t) {
      bytes.push_back(t);
      special.push_back(true);
      return int32_t(bytes.size() - 1);
    };
    eos = add_special("<eos>");
    think = add_special("<think>");
    end_think = add_special("</think>");
    model_vocab = bytes.size() + 5;
  }
  std::shared_ptr<const grammar::Vocabulary> Make() const {
    return std::make_shared<grammar::Vocabulary>(bytes, special, std::vector<int32_t>{eos});
  }
  std::string Decode(const std::vector<int32_t>& ids) const {
    std::string s;
    for (int32_t id : ids)
      if (id != eos) s += bytes[id];
    return s;
  }
};

const TestVocab& Vocab() {
  static const TestVocab v;
  return v;
}

uint64_t Mix(uint64_t x) {
  x = (x ^ (x >> 31)) * 0x7fb5d329728ea185ull;
  x = (x ^ (x >> 27)) * 0x81dadef4bc2dd44dull;
  return x ^ (x >> 33);
}

// Logits in [0, 4): a hash of the row's token and position, with `script` (if any) strongly
// preferred: the token script[position - prompt_len] gets +30.
class HashModel final : public TinyModel {
 public:
  HashModel() : TinyModel(Vocab().model_vocab) {}
  void Forward(const model::Batch& batch, model::KvStorage&, float* logits) override {
    std::vector<size_t> position(batch.token_ids.size());
    size_t row = 0;
    for (const model::SequenceSlice& s : batch.seqs)
      for (size_t i = 0; i < s.num_new_tokens; ++i) position[row++] = s.context_len + i;
    const size_t v = config_.vocab_size;
    for (size_t r = 0; r < batch.logits_rows.size(); ++r) {
      const size_t at = batch.logits_rows[r];
      const uint64_t key = Mix(uint64_t(batch.token_ids[at]) * 1000003 + position[at]);
      for (size_t i = 0; i < v; ++i) logits[r * v + i] = float(Mix(key + i) % 4000) / 1000.0f;
      const size_t step = position[at] + 1 - prompt_len;
      if (step < script.size()) logits[r * v + script[step]] += 30.0f;
    }
  }
  std::vector<int32_t> script;
  size_t prompt_len = 2;
};

class Sink final : public RequestSink {
 public:
  std::optional<std::string> OnOutput(const EngineOutput& out) override {
    for (size_t i = 0; i < out.new_tokens.size(); ++i) {
      tokens.push_back(out.new_tokens[i]);
      if (i < out.new_logprobs.size()) logprobs.push_back(out.new_logprobs[i]);
    }
    if (out.finished) reason = out.reason;
    return std::nullopt;
  }
  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> logprobs;
  FinishReason reason = FinishReason::kNone;
};

struct Engine {
  explicit Engine(size_t kv_blocks = 256) {
    EngineConfig c;
    c.scheduler.max_model_len = 512;
    c.scheduler.num_kv_blocks = kv_blocks;
    c.scheduler.block_size = 4;
    c.scheduler.eos_token_ids = {Vocab().eos};
    engine = std::make_unique<LLMEngine>(model, c, model::RunContext{});
  }
  std::shared_ptr<Sink> Add(uint64_t id, SamplingParams p) {
    auto sink = std::make_shared<Sink>();
    EXPECT_EQ(engine->AddRequest(id, {1, 2}, std::move(p), sink), "");
    return sink;
  }
  HashModel model;
  std::unique_ptr<LLMEngine> engine;
};

std::shared_ptr<const grammar::CompiledGrammar> Compile(const grammar::GrammarAst& ast) {
  return grammar::CompileForVocabulary(ast, Vocab().Make());
}

bool Matches(const grammar::CompiledGrammar& g, const std::string& text) {
  grammar::EarleyParser p(g.grammar());
  for (char c : text)
    if (!p.Advance(static_cast<uint8_t>(c))) return false;
  return p.CanFinish();
}

SamplingParams Constrained(std::shared_ptr<const grammar::CompiledGrammar> g, uint64_t seed) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.max_tokens = 300;
  p.seed = seed;
  p.grammar = std::move(g);
  return p;
}

TEST(GrammarSampling, EveryOutputMatchesAndFinishesStop) {
  const auto schema = Compile(grammar::JsonSchemaToGrammar(
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},
          "ok":{"type":"boolean"},"n":{"type":"integer","minimum":0,"maximum":99}},
          "required":["name","ok"]})",
      {.compact = true}));
  const auto regex = Compile(grammar::RegexToGrammar("[a-c]{2,5}(-\\d{1,3})?"));
  for (const auto& g : {schema, regex}) {
    Engine e;
    std::vector<std::shared_ptr<Sink>> sinks;
    for (uint64_t seed = 0; seed < 6; ++seed) sinks.push_back(e.Add(seed, Constrained(g, seed)));
    e.engine->RunUntilIdle();
    for (const auto& s : sinks) {
      const std::string text = Vocab().Decode(s->tokens);
      EXPECT_TRUE(Matches(*g, text)) << text;
      EXPECT_EQ(s->reason, FinishReason::kStop) << text;
    }
  }
}

TEST(GrammarSampling, SeedsReproduceAndDifferentSeedsDiffer) {
  const auto g = Compile(grammar::RegexToGrammar("[a-z]{5,10}"));
  auto run = [&](uint64_t seed) {
    Engine e;
    auto s = e.Add(1, Constrained(g, seed));
    e.engine->RunUntilIdle();
    return s->tokens;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(GrammarSampling, SurvivesPreemption) {
  const auto g = Compile(grammar::RegexToGrammar("(ab|\\d){30,50}"));
  Engine e(/*kv_blocks=*/16);  // 64 positions for 4 sequences of at least 32: preemption
  std::vector<std::shared_ptr<Sink>> sinks;
  for (uint64_t i = 0; i < 4; ++i) {
    SamplingParams p = Constrained(g, i);
    p.max_tokens = 60;
    sinks.push_back(e.Add(i, p));
  }
  e.engine->RunUntilIdle();
  EXPECT_GT(e.engine->Stats().num_preemptions, 0u);
  for (const auto& s : sinks) {
    EXPECT_TRUE(Matches(*g, Vocab().Decode(s->tokens))) << Vocab().Decode(s->tokens);
    EXPECT_EQ(s->reason, FinishReason::kStop);
  }
}

TEST(GrammarSampling, GrammarEndFinishesEvenWithMinTokensAndIgnoreEos) {
  const auto g = Compile(grammar::ChoiceToGrammar({"yes", "no"}));
  Engine e;
  SamplingParams p = Constrained(g, 3);
  p.min_tokens = 20;
  p.ignore_eos = true;
  auto s = e.Add(1, p);
  e.engine->RunUntilIdle();
  const std::string text = Vocab().Decode(s->tokens);
  EXPECT_TRUE(text == "yes" || text == "no") << text;
  EXPECT_EQ(s->reason, FinishReason::kStop);
}

// The engine prepares masks on its helper thread while the model runs; sampling by hand with
// masks computed inline must give the same tokens.
TEST(GrammarSampling, PreparedMasksEqualInlineMasks) {
  struct NoKv final : model::KvStorage {
    size_t block_size() const override { return 4; }
    DType dtype() const override { return DType::kBF16; }
    uint8_t* KeyBlock(size_t, int32_t) override { return nullptr; }
    uint8_t* ValueBlock(size_t, int32_t) override { return nullptr; }
  };
  const auto g = Compile(grammar::JsonSchemaToGrammar(
      R"({"type":"array","items":{"enum":["ab","é",12,true]},"maxItems":6})", {}));
  Engine e;
  auto sink = e.Add(1, Constrained(g, 11));
  e.engine->RunUntilIdle();

  HashModel model;
  NoKv kv;
  SamplingParams p = Constrained(g, 11);
  std::vector<int32_t> tokens = {1, 2};
  SamplerState state(p, tokens, 0);
  Sampler sampler;
  std::vector<float> row(model.config().vocab_size);
  std::vector<int32_t> generated;
  while (generated.size() < 300) {
    model::Batch batch;
    batch.token_ids = {tokens.back()};
    batch.seqs.push_back({1, tokens.size() - 1, {}});
    batch.logits_rows = {0};
    model.Forward(batch, kv, row.data());
    const int32_t t =
        sampler.Sample(row.data(), row.size(), p, state, {&Vocab().eos, 1}, generated.size()).token;
    tokens.push_back(t);
    generated.push_back(t);
    state.Accept(t);
    if (t == Vocab().eos || state.grammar_finished()) break;
  }
  EXPECT_EQ(sink->tokens, generated);
}

TEST(GrammarSampling, LogprobsAreOfTheMaskedDistribution) {
  // Greedy on flat logits: every allowed token ties; the first token of "[xy]" has two choices.
  const auto g = Compile(grammar::RegexToGrammar("[xy]z"));
  std::vector<float> logits(Vocab().model_vocab, 0.0f);
  logits['y'] = 1.0f;
  logits['q'] = 5.0f;  // the model's favourite is not allowed
  SamplingParams p = Constrained(g, 1);
  p.temperature = 0;
  p.logprobs = 3;
  SamplerState state(p, std::vector<int32_t>{1}, 0);
  Sampler sampler;
  const SampleResult r = sampler.Sample(logits.data(), logits.size(), p, state, {}, 0);
  EXPECT_EQ(r.token, 'y');
  const float lse = std::log(std::exp(1.0f) + 1.0f);
  EXPECT_NEAR(r.logprob, 1.0f - lse, 1e-5);
  ASSERT_EQ(r.top_logprobs.size(), 3u);
  EXPECT_EQ(r.top_logprobs[0].first, 'y');
  EXPECT_EQ(r.top_logprobs[1].first, 'x');
  EXPECT_NEAR(r.top_logprobs[1].second, -lse, 1e-5);
  EXPECT_TRUE(std::isinf(r.top_logprobs[2].second));  // only two tokens are allowed
}

TEST(GrammarSampling, ReasoningRunsFreeUntilTheTrigger) {
  const TestVocab& v = Vocab();
  const auto g = Compile(grammar::RegexToGrammar("\\d{3}"));
  Engine e;
  // The model insists on "<think>hm</think>" then letters, which the grammar forbids.
  e.model.script = {v.think, 'h', 'm', v.end_think, 'x', 'y', 'z', 'w'};
  SamplingParams p = Constrained(g, 5);
  p.grammar_start_after = "</think>";
  auto s = e.Add(1, p);
  e.engine->RunUntilIdle();
  ASSERT_GE(s->tokens.size(), 7u);
  EXPECT_EQ(std::vector<int32_t>(s->tokens.begin(), s->tokens.begin() + 4),
            (std::vector<int32_t>{v.think, 'h', 'm', v.end_think}));
  const std::string answer = v.Decode(std::vector<int32_t>(s->tokens.begin() + 4, s->tokens.end()));
  EXPECT_TRUE(Matches(*g, answer)) << answer;
  EXPECT_EQ(s->reason, FinishReason::kStop);
}

TEST(GrammarSampling, TriggerSplitAcrossTokensAndAnswerInTheSameToken) {
  const TestVocab& v = Vocab();
  const auto g = Compile(grammar::ParseGbnf("root ::= \"{\\\"\" [a-z]+ \"\\\":1}\""));
  Engine e;
  // The trigger arrives byte by byte and ends inside the token ">{\"" (id 266), whose rest is
  // already the answer's first bytes.
  e.model.script = {'<', '/', 't', 'h', 'i', 'n', 'k', 266};
  SamplingParams p = Constrained(g, 2);
  p.grammar_start_after = "</think>";
  auto s = e.Add(1, p);
  e.engine->RunUntilIdle();
  const std::string text = v.Decode(s->tokens);
  ASSERT_EQ(text.rfind("</think>{\"", 0), 0u) << text;
  EXPECT_TRUE(Matches(*g, text.substr(8))) << text;
}

}  // namespace
}  // namespace moeserve::engine
