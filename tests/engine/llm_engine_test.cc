// Unit tests of LLMEngine's step loop on a tiny model whose answer is known: the logits of a row
// put all weight on (that row's token + 1) mod vocab, so greedy decoding counts up and every
// logprob has a closed form. Checks how batches are built from the scheduled sequences, prompt
// logprobs over chunked prefills, and the Abort contract (engine_interface.h): no sink call after
// Abort returns, KV blocks freed by the next step.
#include "engine/llm_engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <thread>

#include "tiny_model.h"

namespace moeserve::engine {
namespace {

constexpr size_t kVocab = 32;
constexpr float kPeak = 10.0f;  // the logit of the next token; every other logit is 0

// log_softmax of a row with one kPeak and kVocab - 1 zeros.
float PeakLogprob() {
  return kPeak - std::log(std::exp(kPeak) + float(kVocab - 1));
}
float OtherLogprob() {
  return -std::log(std::exp(kPeak) + float(kVocab - 1));
}

class CountingModel final : public TinyModel {
 public:
  CountingModel() : TinyModel(kVocab) {}

  void Forward(const model::Batch& batch, model::KvStorage&, float* logits) override {
    batches.push_back(batch);
    batches.back().seqs.clear();  // block-table spans die with the step; keep the counts only
    for (const model::SequenceSlice& s : batch.seqs)
      slices.push_back({s.num_new_tokens, s.context_len});
    for (size_t r = 0; r < batch.logits_rows.size(); ++r) {
      float* row = logits + r * kVocab;
      std::fill(row, row + kVocab, 0.0f);
      row[(batch.token_ids[batch.logits_rows[r]] + 1) % kVocab] = kPeak;
    }
    if (during_forward) during_forward();
  }

  std::vector<model::Batch> batches;
  std::vector<std::pair<size_t, size_t>> slices;  // (num_new_tokens, context_len) in step order
  std::function<void()> during_forward;           // runs inside the step, after the logits
};

// Records every call; `aborted` is set by the test once Abort has returned.
class RecordingSink final : public RequestSink {
 public:
  std::optional<std::string> OnOutput(const EngineOutput& out) override {
    if (aborted.load()) ++calls_after_abort;
    ++num_calls;
    outputs.push_back(out);
    for (int32_t t : out.new_tokens) tokens.push_back(t);
    return std::nullopt;
  }
  std::vector<EngineOutput> outputs;
  std::vector<int32_t> tokens;
  std::atomic<bool> aborted{false};
  std::atomic<int> calls_after_abort{0};
  std::atomic<size_t> num_calls{0};  // readable from other threads, unlike outputs
};

struct Fixture {
  explicit Fixture(size_t max_batched_tokens = 64, size_t long_prefill = 0,
                   size_t max_model_len = 64) {
    EngineConfig c;
    c.scheduler.max_num_batched_tokens = max_batched_tokens;
    c.scheduler.long_prefill_token_threshold = long_prefill;
    c.scheduler.max_num_prefills_while_decoding = 0;
    c.scheduler.max_model_len = max_model_len;
    c.scheduler.num_kv_blocks = 32;
    c.scheduler.block_size = 4;
    c.scheduler.prefix_caching = false;
    engine = std::make_unique<LLMEngine>(model, c, model::RunContext{});
  }
  std::shared_ptr<RecordingSink> Add(uint64_t id, std::vector<int32_t> prompt, int max_tokens,
                                     int prompt_logprobs = -1) {
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    p.logprobs = 0;
    p.prompt_logprobs = prompt_logprobs;
    auto sink = std::make_shared<RecordingSink>();
    EXPECT_EQ(engine->AddRequest(id, std::move(prompt), p, sink), "");
    return sink;
  }
  CountingModel model;
  std::unique_ptr<LLMEngine> engine;
};

TEST(LLMEngine, BuildsOneFlatBatchThenDecodesEachSequence) {
  Fixture f;
  auto a = f.Add(1, {1, 2, 3, 4, 5}, 3);
  auto b = f.Add(2, {20, 21, 22}, 2);
  f.engine->RunUntilIdle();

  ASSERT_GE(f.model.batches.size(), 3u);
  // Step 1: both prompts in one batch, one logits row each (its last prompt token).
  const model::Batch& first = f.model.batches[0];
  EXPECT_EQ(first.token_ids, (std::vector<int32_t>{1, 2, 3, 4, 5, 20, 21, 22}));
  EXPECT_EQ(first.logits_rows, (std::vector<int32_t>{4, 7}));
  EXPECT_EQ(f.model.slices[0], (std::pair<size_t, size_t>{5, 0}));
  EXPECT_EQ(f.model.slices[1], (std::pair<size_t, size_t>{3, 0}));
  // Step 2: one new token each, at the position after its prompt.
  const model::Batch& second = f.model.batches[1];
  EXPECT_EQ(second.token_ids, (std::vector<int32_t>{6, 23}));
  EXPECT_EQ(second.logits_rows, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(f.model.slices[2], (std::pair<size_t, size_t>{1, 5}));
  EXPECT_EQ(f.model.slices[3], (std::pair<size_t, size_t>{1, 3}));

  EXPECT_EQ(a->tokens, (std::vector<int32_t>{6, 7, 8}));
  EXPECT_EQ(b->tokens, (std::vector<int32_t>{23, 24}));
  ASSERT_TRUE(a->outputs.back().finished);
  EXPECT_EQ(a->outputs.back().reason, FinishReason::kLength);
  EXPECT_EQ(a->outputs.back().num_output_tokens, 3u);
  for (const EngineOutput& o : a->outputs) {
    ASSERT_EQ(o.new_logprobs.size(), 1u);
    EXPECT_NEAR(o.new_logprobs[0].logprob, PeakLogprob(), 1e-4);
  }
  EXPECT_EQ(f.engine->Stats().kv_blocks_used, 0u);
}

TEST(LLMEngine, PromptLogprobsCoverEveryPromptTokenAcrossChunks) {
  // 3 prompt tokens per step: the 7-token prompt is computed in three chunks.
  Fixture f(/*max_batched_tokens=*/64, /*long_prefill=*/3);
  const std::vector<int32_t> prompt = {1, 2, 3, 9, 10, 11, 5};
  auto sink = f.Add(1, prompt, 2, /*prompt_logprobs=*/2);
  f.engine->RunUntilIdle();

  // Every prompt row asks for logits while prompt logprobs are wanted.
  EXPECT_EQ(f.model.batches[0].logits_rows, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(f.model.batches[2].logits_rows, (std::vector<int32_t>{0}));
  EXPECT_EQ(f.model.slices[2], (std::pair<size_t, size_t>{1, 6}));

  ASSERT_FALSE(sink->outputs.empty());
  const auto& pl = sink->outputs[0].prompt_logprobs;
  ASSERT_EQ(pl.size(), prompt.size());
  EXPECT_FALSE(pl[0].has_value());  // nothing predicts the first token
  for (size_t i = 1; i < prompt.size(); ++i) {
    ASSERT_TRUE(pl[i].has_value()) << i;
    EXPECT_EQ(pl[i]->token, prompt[i]);
    const bool predicted = prompt[i] == prompt[i - 1] + 1;
    EXPECT_NEAR(pl[i]->logprob, predicted ? PeakLogprob() : OtherLogprob(), 1e-4) << i;
    ASSERT_EQ(pl[i]->top.size(), 2u);
    EXPECT_EQ(pl[i]->top[0].first, prompt[i - 1] + 1);
  }
  for (size_t k = 1; k < sink->outputs.size(); ++k)
    EXPECT_TRUE(sink->outputs[k].prompt_logprobs.empty());
  EXPECT_EQ(sink->tokens, (std::vector<int32_t>{6, 7}));
}

TEST(LLMEngine, AbortDuringAStepStopsTheSinkAndFreesBlocksByTheNextStep) {
  Fixture f;
  auto a = f.Add(1, {1, 2, 3, 4, 5, 6, 7, 8, 9}, 20);
  auto b = f.Add(2, {3, 4}, 4);
  ASSERT_TRUE(f.engine->Step());  // prefill
  ASSERT_EQ(a->tokens.size(), 1u);
  // The next step's forward pass is running when the client goes away.
  f.model.during_forward = [&] {
    f.engine->Abort(1);
    a->aborted = true;
    f.model.during_forward = nullptr;
  };
  ASSERT_TRUE(f.engine->Step());
  EXPECT_EQ(a->calls_after_abort.load(), 0);
  EXPECT_EQ(a->tokens.size(), 1u);
  EXPECT_EQ(b->tokens.size(), 2u);  // the other request is not disturbed
  ASSERT_TRUE(f.engine->Step());
  // Request 2 has computed positions 0-3: one block. Request 1's 3 blocks are back.
  EXPECT_EQ(f.engine->Stats().kv_blocks_used, 1u);
  EXPECT_EQ(f.engine->Stats().num_running, 1u);
  f.engine->RunUntilIdle();
  EXPECT_EQ(a->calls_after_abort.load(), 0);
  EXPECT_EQ(b->tokens, (std::vector<int32_t>{5, 6, 7, 8}));
  EXPECT_EQ(f.engine->Stats().kv_blocks_used, 0u);
}

TEST(LLMEngine, AbortBeforeTheFirstStepNeverCallsTheSink) {
  Fixture f;
  auto a = f.Add(1, {1, 2, 3}, 5);
  f.engine->Abort(1);
  f.engine->RunUntilIdle();
  EXPECT_TRUE(a->outputs.empty());
  EXPECT_EQ(f.engine->Stats().kv_blocks_used, 0u);
  EXPECT_TRUE(f.model.batches.empty());
}

TEST(LLMEngine, AbortFromAnotherThreadWhileTheLoopRuns) {
  Fixture f;
  // Slow steps, so that aborts land while requests run and often while a step is under way.
  f.model.during_forward = [] { std::this_thread::sleep_for(std::chrono::microseconds(200)); };
  std::thread loop([&] { f.engine->RunLoop(); });
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (uint64_t id = 1; id <= 8; ++id) sinks.push_back(f.Add(id, {1, 2, 3}, 60));
  for (uint64_t id = 1; id <= 8; ++id) {
    while (sinks[id - 1]->num_calls.load() < id) std::this_thread::yield();
    f.engine->Abort(id);
    sinks[id - 1]->aborted = true;
  }
  while (f.engine->Stats().num_running > 0) std::this_thread::yield();
  f.engine->Shutdown();
  loop.join();
  for (const auto& s : sinks) EXPECT_EQ(s->calls_after_abort.load(), 0);
  EXPECT_EQ(f.engine->Stats().kv_blocks_used, 0u);
}

// WarmUp (start-up): one step of the largest shape the limits allow, then requests are served
// exactly as by an engine that never warmed up. 64 tokens, 32 blocks of 4: one long prompt and as
// many one-token sequences as the blocks hold (43 tokens in 11 blocks + 21 x 1 block).
TEST(LLMEngine, WarmUpRunsTheLargestStepThenServesAsBefore) {
  Fixture warm, cold;
  warm.engine->WarmUp();
  ASSERT_EQ(warm.model.batches.size(), 1u);
  const model::Batch& step = warm.model.batches[0];
  EXPECT_EQ(step.num_tokens(), 64u);
  ASSERT_EQ(step.logits_rows.size(), 22u);
  EXPECT_EQ(step.logits_rows.front(), 42);
  EXPECT_EQ(step.logits_rows.back(), 63);
  EXPECT_EQ(warm.model.slices.front(), (std::pair<size_t, size_t>{43, 0}));
  EXPECT_EQ(warm.engine->Stats().kv_blocks_used, 0u);
  EXPECT_EQ(warm.engine->Stats().prompt_tokens, 0u);  // not a request: no stats

  for (Fixture* f : {&warm, &cold}) {
    f->Add(1, {1, 2, 3, 4, 5}, 3);
    f->Add(2, {20, 21, 22}, 2);
  }
  auto a = warm.Add(3, {7, 8}, 4);
  auto b = cold.Add(3, {7, 8}, 4);
  warm.engine->RunUntilIdle();
  cold.engine->RunUntilIdle();
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(warm.model.slices.size(), cold.model.slices.size() + 22);
  EXPECT_EQ(warm.engine->Stats().kv_blocks_used, 0u);
}

// The warm-up's step fills the token budget even when one sequence cannot (max_model_len 16 <
// 64 batched tokens): the scheduler batches several prompts, and a warm-up of one max_model_len
// prompt left the step-sized buffers to grow at the first burst of arrivals (issue 14's soak).
// 43 tokens as prompts of 16, 16 and 11 (11 blocks) + 21 one-token sequences = 64 tokens in 32
// blocks.
TEST(LLMEngine, WarmUpFillsTheTokenBudgetWithSeveralPrompts) {
  Fixture f(64, 0, 16);
  f.engine->WarmUp();
  ASSERT_EQ(f.model.batches.size(), 1u);
  const model::Batch& step = f.model.batches[0];
  EXPECT_EQ(step.num_tokens(), 64u);
  ASSERT_EQ(f.model.slices.size(), 24u);
  EXPECT_EQ(f.model.slices[0], (std::pair<size_t, size_t>{16, 0}));
  EXPECT_EQ(f.model.slices[1], (std::pair<size_t, size_t>{16, 0}));
  EXPECT_EQ(f.model.slices[2], (std::pair<size_t, size_t>{11, 0}));
  EXPECT_EQ(f.model.slices[3], (std::pair<size_t, size_t>{1, 0}));
  ASSERT_EQ(step.logits_rows.size(), 24u);
  EXPECT_EQ(step.logits_rows[0], 15);
  EXPECT_EQ(step.logits_rows[1], 31);
  EXPECT_EQ(step.logits_rows[2], 42);
  EXPECT_EQ(step.logits_rows.back(), 63);
  EXPECT_EQ(f.engine->Stats().kv_blocks_used, 0u);
  auto a = f.Add(1, {1, 2, 3, 4, 5}, 3);
  f.engine->RunUntilIdle();
  EXPECT_EQ(a->tokens.size(), 3u);
}

}  // namespace
}  // namespace moeserve::engine
