// Decides what every forward step computes: continuous batching of decodes and (chunked)
// prefills under a token budget, FCFS admission, preemption by recompute when KV blocks run out.
//
// One step, as the engine loop drives it:
//   ScheduledStep step = scheduler.Schedule();
//   model::Batch batch = ToModelBatch(step);            // spans valid until Postprocess
//   model.Forward(batch, ...) -> logits rows, one per seq with needs_logits, in step order
//   for each such seq: sampler.Sample(row, vocab, seq->params(), seq->sampler_state(),
//                                     scheduler.eos_token_ids(), seq->num_output_tokens())
//   auto outputs = scheduler.Postprocess(step, sampled_tokens);
//   (detokenize; on a stop string: scheduler.FinishSequence(id, FinishReason::kStop, str))
//
// Policy:
//  - Running sequences that are decoding are scheduled first (one token each, oldest first),
//    then running sequences still computing their prompt, then waiting ones in arrival order,
//    each taking as many tokens as the remaining budget (and long_prefill_token_threshold)
//    allows (chunked prefill). A waiting sequence that does not fit stops admission (strict
//    FCFS: nobody jumps the queue). While decodes run, at most max_num_prefills_while_decoding
//    sequences compute prompt tokens per step.
//  - KV blocks are allocated step by step for the tokens scheduled. When a sequence cannot get
//    a block, the most recently arrived running sequence not yet scheduled in this step is
//    preempted (possibly the sequence itself): its blocks are freed, its computed-token count
//    reset, and it goes back to the front of the waiting queue; its generated tokens are kept
//    and recomputed as part of its prefix (the prefix cache usually makes that cheap). No new
//    sequence is admitted in a step that preempted.
//  - A prefill chunk that does not reach the end of the sequence's tokens produces no token.
//
// Not thread-safe: one engine thread owns it. Sequence pointers stay valid until the next
// Schedule() after the sequence finished.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/block_manager.h"
#include "engine/sequence.h"
#include "model/batch.h"

namespace moeserve::engine {

struct SchedulerConfig {
  size_t max_num_batched_tokens = 2048;  // tokens per step, all sequences together
  // Most prompt tokens one sequence computes in a step (vLLM's long_prefill_token_threshold);
  // 0: only max_num_batched_tokens limits it. A lower cap spreads a burst of prompts over
  // several steps (first tokens arrive in turn rather than all after the whole burst) and bounds
  // how long one long prompt stalls the running decodes.
  size_t long_prefill_token_threshold = 0;
  // While any sequence decodes, at most this many sequences compute prompt tokens in a step
  // (0: no limit). On a CPU a step's time grows with its tokens and every decode waits for the
  // whole step, so a burst of prompts admitted together stalls all streams and then finishes
  // (and frees slots) together, which makes the next arrivals a burst again. One prompt per step
  // staggers them: with 16 clients, 128-token prompts and 128-token answers on the bench
  // checkpoint, TTFT p50 went from ~4 s (all prompts of a burst in one 2048-token step) to
  // ~0.66 s at the same output tok/s. With no decode running, prompts fill the whole budget.
  size_t max_num_prefills_while_decoding = 1;
  size_t max_num_seqs = 256;    // sequences running at once
  size_t max_model_len = 4096;  // prompt + output tokens of one sequence
  size_t num_kv_blocks = 0;
  size_t block_size = 16;
  bool prefix_caching = true;
  std::vector<int32_t> eos_token_ids;  // any of them ends a sequence (unless ignore_eos)
  uint64_t seed = 0;  // unseeded requests get RNG seeds derived from this and their arrival
};

struct ScheduledSeq {
  Sequence* seq = nullptr;
  size_t context_len = 0;  // tokens already in the KV cache (seq's computed tokens before)
  size_t num_new_tokens = 0;
  bool needs_logits = false;  // the chunk reaches the last token: sample after this step
  // Views into the Sequence, valid until Postprocess of this step.
  std::span<const int32_t> token_ids;    // [num_new_tokens]
  std::span<const int32_t> block_table;  // covers [0, context_len + num_new_tokens)
};

struct ScheduledStep {
  std::vector<ScheduledSeq> seqs;
  size_t num_tokens = 0;
  size_t num_logits = 0;            // sequences with needs_logits
  std::vector<uint64_t> preempted;  // sequences preempted while building this step
  bool empty() const { return seqs.empty(); }
};

// What Postprocess did to one sequence that sampled a token this step.
struct SeqOutput {
  Sequence* seq = nullptr;
  int32_t token = -1;
  bool finished = false;
  FinishReason reason = FinishReason::kNone;
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerConfig& config);

  // "" if a request of this size can ever run, else the reason (for a 400 response): empty
  // prompt, prompt + max_tokens over max_model_len, or more KV than the whole cache holds.
  std::string CheckAdmissible(size_t prompt_len, size_t max_tokens) const;

  // Queues a sequence. Throws moeserve::Error when CheckAdmissible fails or the id is in use.
  Sequence& AddSequence(uint64_t id, std::vector<int32_t> prompt, SamplingParams params);

  ScheduledStep Schedule();

  // Applies a step's results. `sampled_tokens`: one per sequence with needs_logits, in step
  // order. Advances computed tokens, registers completed blocks in the prefix cache, appends
  // tokens, finishes sequences on EOS / stop_token_ids (after min_tokens), max_tokens or
  // max_model_len, and frees their blocks. Sequences aborted since Schedule() are skipped.
  std::vector<SeqOutput> Postprocess(const ScheduledStep& step,
                                     std::span<const int32_t> sampled_tokens);

  // Finishes a waiting or running sequence at once, freeing its blocks. False if unknown or
  // already finished.
  bool Abort(uint64_t id) { return FinishSequence(id, FinishReason::kAbort); }
  bool FinishSequence(uint64_t id, FinishReason reason, std::string stop_string = "");

  Sequence* Find(uint64_t id);
  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  bool HasUnfinished() const { return !waiting_.empty() || !running_.empty(); }
  uint64_t num_preemptions() const { return num_preemptions_; }

  std::span<const int32_t> eos_token_ids() const { return config_.eos_token_ids; }
  const SchedulerConfig& config() const { return config_; }
  const cache::BlockManager& block_manager() const { return blocks_; }

 private:
  // Grows `seq`'s table to cover `num_tokens`, preempting others as needed. False if `seq`
  // itself had to be preempted.
  bool EnsureBlocks(Sequence* seq, size_t num_tokens, ScheduledStep& step);
  void Preempt(Sequence* seq);
  void Finish(Sequence* seq, FinishReason reason);
  void AddToRunning(Sequence* seq);
  void RemoveFromRunning(Sequence* seq);
  void Push(ScheduledStep& step, Sequence* seq, size_t num_new_tokens);
  bool IsScheduled(const Sequence* seq) const { return seq->scheduled_in_step_ == step_id_; }

  SchedulerConfig config_;
  cache::BlockManager blocks_;
  std::unordered_map<uint64_t, std::unique_ptr<Sequence>> seqs_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // by arrival, oldest first
  std::vector<uint64_t> finished_;  // erased from seqs_ at the next Schedule()
  uint64_t next_arrival_ = 0;
  uint64_t step_id_ = 0;
  uint64_t num_preemptions_ = 0;
};

// The model's view of a step: tokens concatenated in step order, one slice per sequence, and
// the last row of every sequence that needs logits. Spans point into the Sequences.
model::Batch ToModelBatch(const ScheduledStep& step);

}  // namespace moeserve::engine
