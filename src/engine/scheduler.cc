#include "engine/scheduler.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "core/check.h"

namespace moeserve::engine {
namespace {

// SplitMix64: decorrelates the seeds of consecutive arrivals.
uint64_t MixSeed(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool Contains(std::span<const int32_t> ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

Scheduler::Scheduler(const SchedulerConfig& config)
    : config_(config), blocks_(config.num_kv_blocks, config.block_size, config.prefix_caching) {
  MOESERVE_CHECK(config.max_num_batched_tokens > 0 && config.max_num_seqs > 0,
                 "max_num_batched_tokens ", config.max_num_batched_tokens, " max_num_seqs ",
                 config.max_num_seqs);
}

std::string Scheduler::CheckAdmissible(size_t prompt_len, size_t max_tokens) const {
  if (prompt_len == 0) return "the prompt must contain at least one token";
  if (prompt_len + max_tokens > config_.max_model_len)
    return detail::Concat("This model's maximum context length is ", config_.max_model_len,
                          " tokens. However, you requested ", prompt_len + max_tokens, " tokens (",
                          prompt_len, " in the messages, ", max_tokens,
                          " in the completion). Please reduce the length of the messages or "
                          "completion.");
  // The last generated token is never fed back, so it needs no KV.
  const size_t kv_tokens = prompt_len + max_tokens - (max_tokens > 0 ? 1 : 0);
  const size_t capacity = blocks_.num_blocks() * blocks_.block_size();
  if (kv_tokens > capacity)
    return detail::Concat("the request needs KV cache for ", kv_tokens,
                          " tokens, but the whole cache holds ", capacity);
  return "";
}

Sequence& Scheduler::AddSequence(uint64_t id, std::vector<int32_t> prompt, SamplingParams params) {
  const std::string error =
      CheckAdmissible(prompt.size(), static_cast<size_t>(std::max(params.max_tokens, 0)));
  if (!error.empty()) throw Error(error);
  if (seqs_.count(id)) Fail("sequence id ", id, " is already in use");
  const uint64_t arrival = next_arrival_++;
  auto seq = std::make_unique<Sequence>(id, std::move(prompt), std::move(params),
                                        MixSeed(config_.seed ^ MixSeed(arrival)));
  seq->arrival_ = arrival;
  Sequence* raw = seq.get();
  seqs_.emplace(id, std::move(seq));
  waiting_.push_back(raw);
  return *raw;
}

Sequence* Scheduler::Find(uint64_t id) {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

void Scheduler::AddToRunning(Sequence* seq) {
  auto pos = std::upper_bound(
      running_.begin(), running_.end(), seq,
      [](const Sequence* a, const Sequence* b) { return a->arrival_ < b->arrival_; });
  running_.insert(pos, seq);
  seq->status_ = SeqStatus::kRunning;
}

void Scheduler::RemoveFromRunning(Sequence* seq) {
  auto it = std::find(running_.begin(), running_.end(), seq);
  MOESERVE_CHECK(it != running_.end(), "sequence ", seq->id(), " is not running");
  running_.erase(it);
}

void Scheduler::Preempt(Sequence* seq) {
  RemoveFromRunning(seq);
  blocks_.Free(seq->blocks_);
  seq->num_computed_tokens_ = 0;
  seq->status_ = SeqStatus::kWaiting;
  ++seq->num_preemptions_;
  ++num_preemptions_;
  waiting_.push_front(seq);
}

void Scheduler::Finish(Sequence* seq, FinishReason reason) {
  if (seq->status_ == SeqStatus::kRunning) {
    RemoveFromRunning(seq);
  } else if (seq->status_ == SeqStatus::kWaiting) {
    auto it = std::find(waiting_.begin(), waiting_.end(), seq);
    MOESERVE_CHECK(it != waiting_.end(), "sequence ", seq->id(), " is not waiting");
    waiting_.erase(it);
  }
  blocks_.Free(seq->blocks_);
  seq->status_ = SeqStatus::kFinished;
  seq->finish_reason_ = reason;
  finished_.push_back(seq->id());
}

bool Scheduler::FinishSequence(uint64_t id, FinishReason reason, std::string stop_string) {
  Sequence* seq = Find(id);
  if (seq == nullptr || seq->is_finished()) return false;
  seq->stop_string_ = std::move(stop_string);
  Finish(seq, reason);
  return true;
}

bool Scheduler::EnsureBlocks(Sequence* seq, size_t num_tokens, ScheduledStep& step) {
  while (!blocks_.CanGrow(seq->blocks_, num_tokens)) {
    // Newest first; sequences already in this step keep their blocks. `seq` itself is running
    // and unscheduled, so a victim always exists.
    auto victim = std::find_if(running_.rbegin(), running_.rend(),
                               [this](const Sequence* s) { return !IsScheduled(s); });
    MOESERVE_CHECK(victim != running_.rend());
    Sequence* target = *victim;
    Preempt(target);
    step.preempted.push_back(target->id());
    if (target == seq) return false;
  }
  blocks_.Grow(seq->blocks_, num_tokens);
  return true;
}

void Scheduler::Push(ScheduledStep& step, Sequence* seq, size_t num_new_tokens) {
  ScheduledSeq s;
  s.seq = seq;
  s.context_len = seq->num_computed_tokens_;
  s.num_new_tokens = num_new_tokens;
  s.needs_logits = s.context_len + num_new_tokens == seq->num_tokens();
  seq->scheduled_in_step_ = step_id_;
  step.num_tokens += num_new_tokens;
  step.num_logits += s.needs_logits ? 1 : 0;
  step.seqs.push_back(s);
}

ScheduledStep Scheduler::Schedule() {
  for (uint64_t id : finished_) seqs_.erase(id);
  finished_.clear();
  ++step_id_;
  ScheduledStep step;
  size_t budget = config_.max_num_batched_tokens;
  const std::vector<Sequence*> running = running_;  // Preempt edits running_
  const size_t chunk_cap = config_.long_prefill_token_threshold > 0
                               ? config_.long_prefill_token_threshold
                               : config_.max_num_batched_tokens;

  // 1. Decodes, oldest first.
  for (Sequence* seq : running) {
    if (seq->status_ != SeqStatus::kRunning || seq->is_prefilling()) continue;
    if (budget == 0 || step.seqs.size() >= config_.max_num_seqs) break;
    if (!EnsureBlocks(seq, seq->num_computed_tokens_ + 1, step)) continue;
    Push(step, seq, 1);
    --budget;
  }
  // Prefills allowed in this step beside the decodes above.
  const size_t decodes = step.seqs.size();
  size_t prefills_left = decodes > 0 && config_.max_num_prefills_while_decoding > 0
                             ? config_.max_num_prefills_while_decoding
                             : SIZE_MAX;
  // 2. Running sequences in the middle of their prompt (or of a recompute).
  for (Sequence* seq : running) {
    if (seq->status_ != SeqStatus::kRunning || !seq->is_prefilling() || IsScheduled(seq)) continue;
    if (budget == 0 || step.seqs.size() >= config_.max_num_seqs || prefills_left == 0) break;
    const size_t n = std::min({seq->num_tokens() - seq->num_computed_tokens_, budget, chunk_cap});
    if (!EnsureBlocks(seq, seq->num_computed_tokens_ + n, step)) continue;
    Push(step, seq, n);
    budget -= n;
    --prefills_left;
  }
  // 3. Admission, strictly first come first served.
  while (step.preempted.empty() && !waiting_.empty() && budget > 0 && prefills_left > 0 &&
         running_.size() < config_.max_num_seqs && step.seqs.size() < config_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    const auto tokens = seq->tokens();
    // Prompt logprobs need the logits of every prompt row, so such a prompt is computed in
    // full: the prefix-cache lookup sees only its first token, which never matches a block.
    const bool wants_prompt_rows =
        seq->params().prompt_logprobs >= 0 && seq->num_output_tokens() == 0;
    const auto lookup = wants_prompt_rows ? tokens.first(1) : tokens;
    const size_t cached = blocks_.CachedPrefixTokens(lookup);
    const size_t n = std::min({tokens.size() - cached, budget, chunk_cap});
    if (!blocks_.CanAllocate(lookup, cached + n)) break;
    MOESERVE_CHECK(blocks_.Allocate(seq->blocks_, lookup, cached + n) == cached);
    waiting_.pop_front();
    seq->num_computed_tokens_ = cached;
    if (!seq->admitted_before_) seq->num_cached_prompt_tokens_ = cached;
    seq->admitted_before_ = true;
    AddToRunning(seq);
    Push(step, seq, n);
    budget -= n;
    --prefills_left;
  }

  // Views are taken last: no table changes after this point until Postprocess.
  for (ScheduledSeq& s : step.seqs) {
    const size_t end = s.context_len + s.num_new_tokens;
    s.token_ids = s.seq->tokens().subspan(s.context_len, s.num_new_tokens);
    s.block_table = std::span<const int32_t>(s.seq->blocks_.table).first(blocks_.BlocksFor(end));
  }
  return step;
}

std::vector<SeqOutput> Scheduler::Postprocess(const ScheduledStep& step,
                                              std::span<const int32_t> sampled_tokens) {
  MOESERVE_CHECK(sampled_tokens.size() == step.num_logits, "got ", sampled_tokens.size(),
                 " sampled tokens for ", step.num_logits, " sequences");
  std::vector<SeqOutput> outputs;
  size_t next_sample = 0;
  for (const ScheduledSeq& s : step.seqs) {
    const int32_t token = s.needs_logits ? sampled_tokens[next_sample++] : -1;
    Sequence* seq = s.seq;
    if (seq->is_finished()) continue;  // aborted after Schedule()
    MOESERVE_CHECK(
        seq->status_ == SeqStatus::kRunning && seq->num_computed_tokens_ == s.context_len,
        "sequence ", seq->id(), " changed between Schedule and Postprocess");
    seq->num_computed_tokens_ += s.num_new_tokens;
    if (!s.needs_logits) {
      blocks_.CacheComputedBlocks(seq->blocks_, seq->tokens(), seq->num_computed_tokens_);
      continue;
    }
    seq->AppendToken(token);
    blocks_.CacheComputedBlocks(seq->blocks_, seq->tokens(), seq->num_computed_tokens_);

    // vLLM's order: length limits first, then (once min_tokens are out) EOS and stop ids.
    const SamplingParams& params = seq->params();
    FinishReason reason = FinishReason::kNone;
    if (seq->num_tokens() >= config_.max_model_len ||
        seq->num_output_tokens() >= static_cast<size_t>(params.max_tokens)) {
      reason = FinishReason::kLength;
    } else {
      if (seq->num_output_tokens() >= static_cast<size_t>(std::max(params.min_tokens, 0))) {
        if (!params.ignore_eos && Contains(config_.eos_token_ids, token)) {
          reason = FinishReason::kStop;
        } else if (Contains(params.stop_token_ids, token)) {
          reason = FinishReason::kStop;
          seq->stop_token_id_ = token;
        }
      }
      // A grammar that has ended allows nothing more (not even past min_tokens or ignore_eos).
      if (reason == FinishReason::kNone && seq->sampler_state().grammar_finished())
        reason = FinishReason::kStop;
    }
    if (reason != FinishReason::kNone) Finish(seq, reason);
    outputs.push_back({seq, token, reason != FinishReason::kNone, reason});
  }
  return outputs;
}

model::Batch ToModelBatch(const ScheduledStep& step) {
  model::Batch batch;
  batch.token_ids.reserve(step.num_tokens);
  batch.seqs.reserve(step.seqs.size());
  for (const ScheduledSeq& s : step.seqs) {
    batch.token_ids.insert(batch.token_ids.end(), s.token_ids.begin(), s.token_ids.end());
    batch.seqs.push_back({.num_new_tokens = s.num_new_tokens,
                          .context_len = s.context_len,
                          .block_table = s.block_table});
    if (s.needs_logits)
      batch.logits_rows.push_back(static_cast<int32_t>(batch.token_ids.size() - 1));
  }
  return batch;
}

}  // namespace moeserve::engine
