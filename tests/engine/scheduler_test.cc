#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "core/check.h"

namespace moeserve::engine {
namespace {

constexpr size_t kVocab = 64;
constexpr int32_t kEos = 0;

// A stand-in for Model::Forward that really goes through the paged KV: it stores each new
// token in its block row, reads the whole context back through the block table, and derives
// the logits from what it read. A wrong block table, a wrongly shared prefix block or a wrong
// context length changes the logits, hence the tokens.
class FakeModel {
 public:
  FakeModel(size_t num_blocks, size_t block_size)
      : block_size_(block_size), slots_(num_blocks * block_size, -1) {}

  // [logits_rows, kVocab]
  std::vector<float> Forward(const model::Batch& batch) {
    std::vector<float> logits;
    size_t row = 0, next_logits = 0;
    for (const model::SequenceSlice& s : batch.seqs) {
      const size_t end = s.context_len + s.num_new_tokens;
      EXPECT_GE(s.block_table.size() * block_size_, end);
      for (size_t i = 0; i < s.num_new_tokens; ++i)
        Slot(s.block_table, s.context_len + i) = batch.token_ids[row + i];
      for (size_t i = 0; i < s.num_new_tokens; ++i, ++row) {
        if (next_logits < batch.logits_rows.size() &&
            static_cast<size_t>(batch.logits_rows[next_logits]) == row) {
          ++next_logits;
          // Context of this row: positions [0, context_len + i].
          uint64_t h = 1469598103934665603ull;
          for (size_t p = 0; p <= s.context_len + i; ++p)
            h = (h ^ static_cast<uint32_t>(Slot(s.block_table, p))) * 1099511628211ull;
          std::mt19937_64 rng(h);
          std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
          for (size_t v = 0; v < kVocab; ++v) logits.push_back(dist(rng));
          logits[logits.size() - kVocab + kEos] -= 2.0f;  // make EOS rarer
        }
      }
    }
    EXPECT_EQ(next_logits, batch.logits_rows.size());
    return logits;
  }

 private:
  int32_t& Slot(std::span<const int32_t> table, size_t pos) {
    return slots_[table[pos / block_size_] * block_size_ + pos % block_size_];
  }
  size_t block_size_;
  std::vector<int32_t> slots_;
};

struct Request {
  uint64_t id;
  size_t arrival_step;
  std::vector<int32_t> prompt;
  SamplingParams params;
};

std::vector<Request> RandomRequests(uint64_t seed, size_t count) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> prefixes(3);
  for (auto& p : prefixes)
    for (int i = 0; i < 24; ++i) p.push_back(1 + static_cast<int32_t>(rng() % (kVocab - 1)));
  std::vector<Request> requests;
  for (size_t i = 0; i < count; ++i) {
    Request r;
    r.id = 100 + i;
    r.arrival_step = rng() % 30;
    const auto& prefix = prefixes[rng() % 3];
    r.prompt.assign(prefix.begin(), prefix.begin() + rng() % prefix.size());
    for (size_t n = 1 + rng() % 30; n > 0; --n)
      r.prompt.push_back(1 + static_cast<int32_t>(rng() % (kVocab - 1)));
    r.params.max_tokens = 5 + static_cast<int>(rng() % 35);
    if (i % 3 == 0) {
      r.params.temperature = 0.0f;
    } else {
      r.params.temperature = 0.9f;
      r.params.top_p = 0.9f;
      r.params.seed = rng();
    }
    if (i % 4 == 0) r.params.min_tokens = 3;
    requests.push_back(r);
  }
  std::stable_sort(requests.begin(), requests.end(), [](const Request& a, const Request& b) {
    return a.arrival_step < b.arrival_step;
  });
  return requests;
}

struct Result {
  std::vector<int32_t> output;
  FinishReason reason;
  bool operator==(const Result&) const = default;
};

struct RunStats {
  uint64_t preemptions = 0;
  size_t steps = 0;
  uint64_t hit_tokens = 0;
};

// The engine loop, with per-step checks of the scheduler's promises.
std::map<uint64_t, Result> RunEngine(const SchedulerConfig& config,
                                     const std::vector<Request>& requests,
                                     RunStats* stats = nullptr) {
  Scheduler scheduler(config);
  FakeModel model(config.num_kv_blocks, config.block_size);
  Sampler sampler;
  std::map<uint64_t, Result> results;
  size_t next_request = 0;
  for (size_t step_no = 0; step_no < 100000; ++step_no) {
    while (next_request < requests.size() && requests[next_request].arrival_step <= step_no) {
      const Request& r = requests[next_request++];
      scheduler.AddSequence(r.id, r.prompt, r.params);
    }
    if (!scheduler.HasUnfinished()) {
      if (next_request == requests.size()) break;
      continue;
    }
    ScheduledStep step = scheduler.Schedule();
    EXPECT_FALSE(step.empty()) << "no progress at step " << step_no;
    EXPECT_LE(step.num_tokens, config.max_num_batched_tokens);
    EXPECT_LE(step.seqs.size(), config.max_num_seqs);
    EXPECT_LE(scheduler.num_running(), config.max_num_seqs);
    for (const ScheduledSeq& s : step.seqs) {
      const auto tokens = s.seq->tokens();
      EXPECT_EQ(s.context_len, s.seq->num_computed_tokens());
      EXPECT_TRUE(
          std::equal(s.token_ids.begin(), s.token_ids.end(), tokens.begin() + s.context_len));
      EXPECT_EQ(s.needs_logits, s.context_len + s.num_new_tokens == tokens.size());
    }
    const model::Batch batch = ToModelBatch(step);
    const std::vector<float> logits = model.Forward(batch);
    std::vector<int32_t> sampled;
    for (const ScheduledSeq& s : step.seqs) {
      if (!s.needs_logits) continue;
      const float* row = logits.data() + sampled.size() * kVocab;
      const std::vector<int32_t> eos = {kEos};
      sampled.push_back(sampler
                            .Sample(row, kVocab, s.seq->params(), s.seq->sampler_state(), eos,
                                    s.seq->num_output_tokens())
                            .token);
    }
    for (const SeqOutput& out : scheduler.Postprocess(step, sampled)) {
      if (!out.finished) continue;
      const auto o = out.seq->output();
      results[out.seq->id()] = {std::vector<int32_t>(o.begin(), o.end()), out.reason};
      EXPECT_GE(o.size(), static_cast<size_t>(out.seq->params().min_tokens));
    }
    scheduler.block_manager().CheckInvariants();
    if (stats) ++stats->steps;
  }
  EXPECT_FALSE(scheduler.HasUnfinished());
  EXPECT_EQ(scheduler.block_manager().num_used_blocks(), 0u);
  if (stats) {
    stats->preemptions = scheduler.num_preemptions();
    stats->hit_tokens = scheduler.block_manager().stats().hit_tokens;
  }
  return results;
}

SchedulerConfig BaseConfig() {
  SchedulerConfig c;
  c.max_num_batched_tokens = 64;
  c.max_num_seqs = 8;
  c.max_model_len = 128;
  c.num_kv_blocks = 512;
  c.block_size = 4;
  c.eos_token_ids = {kEos};
  return c;
}

TEST(Scheduler, TightMemoryAndSmallBudgetsGiveTheSameTokens) {
  const auto requests = RandomRequests(1, 40);
  RunStats ample_stats;
  const auto ample = RunEngine(BaseConfig(), requests, &ample_stats);
  ASSERT_EQ(ample.size(), requests.size());
  EXPECT_EQ(ample_stats.preemptions, 0u);
  EXPECT_GT(ample_stats.hit_tokens, 0u);

  SchedulerConfig tight = BaseConfig();
  tight.num_kv_blocks = 26;  // one longest request (prompt 53 + 39 outputs) just fits
  RunStats tight_stats;
  EXPECT_EQ(RunEngine(tight, requests, &tight_stats), ample);
  EXPECT_GT(tight_stats.preemptions, 0u);

  tight.prefix_caching = false;
  RunStats no_cache_stats;
  EXPECT_EQ(RunEngine(tight, requests, &no_cache_stats), ample);
  EXPECT_GT(no_cache_stats.preemptions, 0u);
  EXPECT_EQ(no_cache_stats.hit_tokens, 0u);

  SchedulerConfig small = BaseConfig();
  small.max_num_batched_tokens = 5;
  small.max_num_seqs = 3;
  small.num_kv_blocks = 40;
  EXPECT_EQ(RunEngine(small, requests), ample);

  SchedulerConfig one = BaseConfig();
  one.max_num_seqs = 1;
  one.block_size = 16;
  one.num_kv_blocks = 7;
  EXPECT_EQ(RunEngine(one, requests), ample);
}

TEST(Scheduler, ChunkedPrefillSplitsThePrompt) {
  SchedulerConfig c = BaseConfig();
  c.max_num_batched_tokens = 32;
  Scheduler s(c);
  std::vector<int32_t> prompt(100);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = 1 + i % 50;
  SamplingParams params;
  params.max_tokens = 3;
  s.AddSequence(1, prompt, params);
  const size_t chunks[] = {32, 32, 32, 4};
  for (size_t i = 0; i < 4; ++i) {
    ScheduledStep step = s.Schedule();
    ASSERT_EQ(step.seqs.size(), 1u);
    EXPECT_EQ(step.seqs[0].context_len, 32 * i);
    EXPECT_EQ(step.seqs[0].num_new_tokens, chunks[i]);
    EXPECT_EQ(step.seqs[0].needs_logits, i == 3);
    const model::Batch batch = ToModelBatch(step);
    EXPECT_EQ(batch.logits_rows.size(), i == 3 ? 1u : 0u);
    std::vector<int32_t> sampled;
    if (i == 3) sampled.push_back(7);
    const auto out = s.Postprocess(step, sampled);
    EXPECT_EQ(out.size(), i == 3 ? 1u : 0u);
  }
  EXPECT_EQ(s.Find(1)->num_output_tokens(), 1u);
  ScheduledStep step = s.Schedule();
  ASSERT_EQ(step.seqs.size(), 1u);
  EXPECT_EQ(step.seqs[0].num_new_tokens, 1u);
  EXPECT_EQ(step.seqs[0].token_ids[0], 7);
  EXPECT_EQ(step.seqs[0].context_len, 100u);
}

// Runs `steps` steps of a burst of three 25-token prompts (ids 1..3) and returns the step in
// which each first sampled (index = id). Every step stays within the budget, and no prompt
// computes more than `threshold` tokens in a step.
std::vector<size_t> FirstTokenSteps(const SchedulerConfig& c, size_t steps) {
  Scheduler s(c);
  SamplingParams params;
  params.max_tokens = 4;
  for (uint64_t id = 1; id <= 3; ++id) s.AddSequence(id, std::vector<int32_t>(25, id + 1), params);
  std::vector<size_t> first_token_step(4, 0);
  for (size_t step_index = 1; step_index <= steps; ++step_index) {
    ScheduledStep step = s.Schedule();
    EXPECT_LE(step.num_tokens, c.max_num_batched_tokens);
    std::vector<int32_t> sampled;
    for (const ScheduledSeq& q : step.seqs) {
      if (q.seq->num_output_tokens() == 0) {
        EXPECT_LE(q.num_new_tokens, c.long_prefill_token_threshold);
      }
      if (q.needs_logits) {
        sampled.push_back(9);
        if (first_token_step[q.seq->id()] == 0) first_token_step[q.seq->id()] = step_index;
      }
    }
    s.Postprocess(step, sampled);
  }
  return first_token_step;
}

TEST(Scheduler, LongPrefillThresholdCapsEachPromptsChunk) {
  SchedulerConfig c = BaseConfig();
  c.max_num_batched_tokens = 64;
  c.long_prefill_token_threshold = 10;
  // The threshold, not the budget of 64, limits the chunks: 10 + 10 + 10 tokens a step, all
  // three prompts end in step 3.
  std::vector<size_t> first = FirstTokenSteps(c, 6);
  EXPECT_EQ(first[1], 3u);
  EXPECT_EQ(first[2], 3u);
  EXPECT_EQ(first[3], 3u);

  // With the budget also tight, admission is FCFS: the first prompt completes first.
  c.max_num_batched_tokens = 12;
  first = FirstTokenSteps(c, 12);
  EXPECT_LT(first[1], first[2]);
  EXPECT_LT(first[2], first[3]);
}

TEST(Scheduler, OnePromptPerStepWhileDecoding) {
  SchedulerConfig c = BaseConfig();
  c.max_num_batched_tokens = 64;
  SamplingParams params;
  params.max_tokens = 5;
  for (size_t limit : {size_t{1}, size_t{2}, size_t{0}}) {
    c.max_num_prefills_while_decoding = limit;
    Scheduler s(c);
    // Nothing decodes yet: a burst of prompts fills the budget whatever the limit.
    for (uint64_t id = 1; id <= 3; ++id) s.AddSequence(id, {1, 2, 3, 4}, params);
    ScheduledStep step = s.Schedule();
    EXPECT_EQ(step.seqs.size(), 3u);
    s.Postprocess(step, std::vector<int32_t>{7, 7, 7});
    // Three decode now; a second burst is admitted `limit` prompts a step (all at once for 0).
    for (uint64_t id = 4; id <= 7; ++id) s.AddSequence(id, {5, 6, 7}, params);
    step = s.Schedule();
    size_t prefills = 0;
    for (const ScheduledSeq& q : step.seqs) prefills += q.seq->num_output_tokens() == 0;
    EXPECT_EQ(step.seqs.size() - prefills, 3u);
    EXPECT_EQ(prefills, limit == 0 ? 4u : limit) << "limit " << limit;
  }
}

TEST(Scheduler, DecodesComeFirstAndPrefillsFillTheBudget) {
  SchedulerConfig c = BaseConfig();
  c.max_num_batched_tokens = 16;
  Scheduler s(c);
  SamplingParams params;
  params.max_tokens = 10;
  s.AddSequence(1, {5, 6, 7}, params);
  ScheduledStep step = s.Schedule();
  s.Postprocess(step, std::vector<int32_t>{9});
  s.AddSequence(2, std::vector<int32_t>(40, 3), params);
  s.AddSequence(3, {4, 4}, params);
  step = s.Schedule();
  ASSERT_EQ(step.seqs.size(), 2u);  // the budget is gone before sequence 3
  EXPECT_EQ(step.seqs[0].seq->id(), 1u);
  EXPECT_EQ(step.seqs[0].num_new_tokens, 1u);
  EXPECT_TRUE(step.seqs[0].needs_logits);
  EXPECT_EQ(step.seqs[1].seq->id(), 2u);
  EXPECT_EQ(step.seqs[1].num_new_tokens, 15u);
  EXPECT_FALSE(step.seqs[1].needs_logits);
  const model::Batch batch = ToModelBatch(step);
  EXPECT_EQ(batch.num_tokens(), 16u);
  EXPECT_EQ(batch.logits_rows, std::vector<int32_t>{0});
  EXPECT_EQ(batch.seqs[1].context_len, 0u);
  s.Postprocess(step, std::vector<int32_t>{8});
  // Next step: the decode, then the rest of 2's prompt continues before 3 is admitted.
  step = s.Schedule();
  ASSERT_EQ(step.seqs.size(), 2u);
  EXPECT_EQ(step.seqs[1].seq->id(), 2u);
  EXPECT_EQ(step.seqs[1].context_len, 15u);
  EXPECT_EQ(step.seqs[1].num_new_tokens, 15u);
}

TEST(Scheduler, MaxNumSeqsIsRespected) {
  SchedulerConfig c = BaseConfig();
  c.max_num_seqs = 2;
  Scheduler s(c);
  SamplingParams params;
  params.max_tokens = 4;
  params.ignore_eos = true;
  for (uint64_t id = 0; id < 5; ++id) s.AddSequence(id, {1, 2, 3}, params);
  size_t finished = 0;
  while (s.HasUnfinished()) {
    ScheduledStep step = s.Schedule();
    EXPECT_LE(step.seqs.size(), 2u);
    EXPECT_LE(s.num_running(), 2u);
    for (const auto& out : s.Postprocess(step, std::vector<int32_t>(step.num_logits, 5)))
      finished += out.finished;
  }
  EXPECT_EQ(finished, 5u);
}

TEST(Scheduler, PreemptionRequeuesTheNewestAndKeepsItsTokens) {
  SchedulerConfig c = BaseConfig();
  c.block_size = 2;
  c.num_kv_blocks = 6;  // 12 token slots
  Scheduler s(c);
  SamplingParams params;
  params.max_tokens = 7;
  params.ignore_eos = true;
  s.AddSequence(1, {1, 2, 3}, params);
  s.AddSequence(2, {4, 5, 6}, params);
  std::vector<int32_t> outputs_of_2;
  bool preempted = false;
  while (!preempted) {
    ScheduledStep step = s.Schedule();
    if (!step.preempted.empty()) {
      EXPECT_EQ(step.preempted, std::vector<uint64_t>{2});
      preempted = true;
      Sequence* two = s.Find(2);
      EXPECT_EQ(two->status(), SeqStatus::kWaiting);
      EXPECT_EQ(two->num_computed_tokens(), 0u);
      EXPECT_TRUE(two->blocks().table.empty());
      EXPECT_EQ(std::vector<int32_t>(two->output().begin(), two->output().end()), outputs_of_2);
      EXPECT_GT(two->num_output_tokens(), 0u);
    }
    s.Postprocess(step, std::vector<int32_t>(step.num_logits, 9));
    outputs_of_2.assign(s.Find(2)->output().begin(), s.Find(2)->output().end());
  }
  while (s.HasUnfinished()) {
    ScheduledStep step = s.Schedule();
    s.Postprocess(step, std::vector<int32_t>(step.num_logits, 9));
  }
  EXPECT_EQ(s.block_manager().num_used_blocks(), 0u);
}

TEST(Scheduler, AbortFreesBlocks) {
  Scheduler s(BaseConfig());
  SamplingParams params;
  s.AddSequence(1, std::vector<int32_t>(30, 2), params);
  s.AddSequence(2, std::vector<int32_t>(10, 3), params);
  ScheduledStep step = s.Schedule();
  s.Postprocess(step, std::vector<int32_t>(step.num_logits, 5));
  s.AddSequence(3, {1}, params);  // still waiting
  EXPECT_GT(s.block_manager().num_used_blocks(), 0u);
  EXPECT_TRUE(s.Abort(3));
  EXPECT_TRUE(s.Abort(1));
  EXPECT_FALSE(s.Abort(1));
  EXPECT_FALSE(s.Abort(77));
  EXPECT_EQ(s.Find(1)->finish_reason(), FinishReason::kAbort);
  // Aborted between Schedule and Postprocess: skipped.
  step = s.Schedule();
  EXPECT_EQ(s.Find(1), nullptr);  // erased by the next Schedule
  EXPECT_TRUE(s.Abort(2));
  EXPECT_TRUE(s.Postprocess(step, std::vector<int32_t>(step.num_logits, 5)).empty());
  EXPECT_EQ(s.block_manager().num_used_blocks(), 0u);
  EXPECT_FALSE(s.HasUnfinished());
}

// Runs one sequence, feeding `tokens` as the sampled ones, until it finishes.
Sequence* Feed(Scheduler& s, uint64_t id, const SamplingParams& params,
               const std::vector<int32_t>& tokens) {
  s.AddSequence(id, {1, 2, 3}, params);
  for (int32_t t : tokens) {
    ScheduledStep step = s.Schedule();
    const auto out = s.Postprocess(step, std::vector<int32_t>(step.num_logits, t));
    if (!out.empty() && out[0].finished) break;
  }
  return s.Find(id);
}

TEST(Scheduler, StopConditions) {
  SchedulerConfig c = BaseConfig();
  c.eos_token_ids = {0, 60};
  Scheduler s(c);
  SamplingParams params;
  params.max_tokens = 5;
  Sequence* seq = Feed(s, 1, params, {7, 60, 8});
  EXPECT_EQ(seq->finish_reason(), FinishReason::kStop);
  EXPECT_EQ(seq->num_output_tokens(), 2u);
  EXPECT_EQ(seq->stop_token_id(), -1);
  EXPECT_EQ(s.block_manager().num_used_blocks(), 0u);

  seq = Feed(s, 2, params, {7, 7, 7, 7, 7, 7});
  EXPECT_EQ(seq->finish_reason(), FinishReason::kLength);
  EXPECT_EQ(seq->num_output_tokens(), 5u);

  SamplingParams ignore = params;
  ignore.ignore_eos = true;
  seq = Feed(s, 3, ignore, {0, 0, 0, 0, 0, 0});
  EXPECT_EQ(seq->finish_reason(), FinishReason::kLength);

  SamplingParams stop_ids = params;
  stop_ids.stop_token_ids = {42};
  stop_ids.min_tokens = 3;
  seq = Feed(s, 4, stop_ids, {42, 0, 42, 9});
  EXPECT_EQ(seq->finish_reason(), FinishReason::kStop);
  EXPECT_EQ(seq->num_output_tokens(), 3u);  // 42 and 0 came before min_tokens
  EXPECT_EQ(seq->stop_token_id(), 42);

  SchedulerConfig short_ctx = c;
  short_ctx.max_model_len = 6;
  Scheduler t(short_ctx);
  SamplingParams three = params;
  three.max_tokens = 3;
  seq = Feed(t, 5, three, {9, 9, 9, 9});
  EXPECT_EQ(seq->finish_reason(), FinishReason::kLength);
  EXPECT_EQ(seq->num_tokens(), 6u);

  s.AddSequence(6, {1, 2}, params);
  ScheduledStep step = s.Schedule();
  s.Postprocess(step, std::vector<int32_t>{11});
  EXPECT_TRUE(s.FinishSequence(6, FinishReason::kStop, "\n\n"));
  EXPECT_EQ(s.Find(6)->stop_string(), "\n\n");
  EXPECT_FALSE(s.FinishSequence(6, FinishReason::kStop));
  EXPECT_EQ(s.block_manager().num_used_blocks(), 0u);
}

TEST(Scheduler, AdmissionChecks) {
  SchedulerConfig c = BaseConfig();
  c.max_model_len = 100;
  c.num_kv_blocks = 10;  // 40 token slots
  Scheduler s(c);
  EXPECT_NE(s.CheckAdmissible(0, 5), "");
  EXPECT_NE(s.CheckAdmissible(90, 11).find("maximum context length is 100"), std::string::npos);
  EXPECT_EQ(s.CheckAdmissible(30, 11), "");  // 40 KV slots: the last token needs none
  EXPECT_NE(s.CheckAdmissible(30, 12).find("KV cache"), std::string::npos);
  SamplingParams params;
  params.max_tokens = 50;
  EXPECT_THROW(s.AddSequence(1, std::vector<int32_t>(10, 1), params), Error);
  params.max_tokens = 5;
  s.AddSequence(1, std::vector<int32_t>(10, 1), params);
  EXPECT_THROW(s.AddSequence(1, std::vector<int32_t>(10, 1), params), Error);
}

}  // namespace
}  // namespace moeserve::engine
