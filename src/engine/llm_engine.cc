#include "engine/llm_engine.h"

#include <chrono>

#include "core/check.h"
#include "core/log.h"

namespace moeserve::engine {
namespace {
model::KvLayout WithDtype(model::KvLayout layout, DType dtype) {
  layout.dtype = dtype;
  return layout;
}
}  // namespace

LLMEngine::LLMEngine(model::Model& model, const EngineConfig& config, model::RunContext ctx)
    : model_(model),
      ctx_(ctx),
      scheduler_(config.scheduler),
      kv_(WithDtype(model.kv_layout(), config.kv_cache_dtype), config.scheduler.block_size,
          config.scheduler.num_kv_blocks) {}

LLMEngine::~LLMEngine() = default;

std::string LLMEngine::AddRequest(uint64_t id, std::vector<int32_t> prompt, SamplingParams params,
                                  std::shared_ptr<RequestSink> sink) {
  const size_t vocab = model_.config().vocab_size;
  if (std::string e = params.Validate(vocab); !e.empty()) return e;
  for (int32_t t : prompt)
    if (t < 0 || static_cast<size_t>(t) >= vocab)
      return detail::Concat("token id ", t, " is outside the vocabulary [0, ", vocab, ")");
  if (std::string e = scheduler_.CheckAdmissible(prompt.size(), params.max_tokens); !e.empty())
    return e;
  {
    std::lock_guard lock(sinks_mu_);
    sinks_[id] = std::move(sink);
  }
  {
    std::lock_guard lock(mu_);
    incoming_.push_back({id, std::move(prompt), std::move(params)});
  }
  wake_.notify_one();
  return "";
}

void LLMEngine::Abort(uint64_t id) {
  {
    // Waits for a sink call in progress; after this no call can reach the sink.
    std::lock_guard lock(sinks_mu_);
    sinks_.erase(id);
  }
  {
    std::lock_guard lock(mu_);
    aborts_.push_back(id);
  }
  wake_.notify_one();
}

void LLMEngine::Shutdown() {
  {
    std::lock_guard lock(mu_);
    shutdown_ = true;
  }
  wake_.notify_all();
}

void LLMEngine::DrainQueues() {
  std::vector<Pending> incoming;
  std::vector<uint64_t> aborts;
  {
    std::lock_guard lock(mu_);
    incoming.swap(incoming_);
    aborts.swap(aborts_);
  }
  for (Pending& p : incoming)
    scheduler_.AddSequence(p.id, std::move(p.prompt), std::move(p.params));
  for (uint64_t id : aborts) {
    scheduler_.Abort(id);
    prompt_logprobs_.erase(id);
  }
}

model::Batch LLMEngine::BuildBatch(const ScheduledStep& step, std::vector<size_t>& first_row) {
  model::Batch batch;
  batch.token_ids.reserve(step.num_tokens);
  first_row.assign(step.seqs.size(), SIZE_MAX);
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    const ScheduledSeq& s = step.seqs[i];
    const size_t row0 = batch.token_ids.size();
    batch.token_ids.insert(batch.token_ids.end(), s.token_ids.begin(), s.token_ids.end());
    batch.seqs.push_back({s.num_new_tokens, s.context_len, s.block_table});
    const bool wants_prompt =
        s.seq->params().prompt_logprobs >= 0 && s.context_len < s.seq->num_prompt_tokens();
    if (wants_prompt || s.needs_logits) first_row[i] = batch.logits_rows.size();
    if (wants_prompt) {
      for (size_t r = 0; r < s.num_new_tokens; ++r)
        batch.logits_rows.push_back(static_cast<int32_t>(row0 + r));
    } else if (s.needs_logits) {
      batch.logits_rows.push_back(static_cast<int32_t>(row0 + s.num_new_tokens - 1));
    }
  }
  return batch;
}

// Row p of a chunk predicts prompt token p + 1: logprob = log_softmax(row p)[token p + 1].
void LLMEngine::EmitPromptLogprobs(const ScheduledStep& step, const std::vector<size_t>& first_row,
                                   const float* logits) {
  const size_t vocab = model_.config().vocab_size;
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    const ScheduledSeq& s = step.seqs[i];
    const Sequence& seq = *s.seq;
    if (seq.params().prompt_logprobs < 0 || s.context_len >= seq.num_prompt_tokens()) continue;
    auto& entries = prompt_logprobs_[seq.id()];
    if (entries.empty()) entries.resize(seq.num_prompt_tokens());
    const auto tokens = seq.tokens();
    for (size_t r = 0; r < s.num_new_tokens; ++r) {
      const size_t next = s.context_len + r + 1;
      if (next >= seq.num_prompt_tokens()) break;
      const float* row = logits + (first_row[i] + r) * vocab;
      TokenLogprobs lp;
      lp.token = tokens[next];
      lp.logprob = TokenLogprob(row, vocab, lp.token);
      if (seq.params().prompt_logprobs > 0)
        lp.top = TopLogprobs(row, vocab, static_cast<size_t>(seq.params().prompt_logprobs));
      entries[next] = std::move(lp);
    }
  }
}

bool LLMEngine::Step() {
  DrainQueues();
  if (!scheduler_.HasUnfinished()) {
    PublishStats();
    return false;
  }
  ScheduledStep step = scheduler_.Schedule();
  if (step.empty()) return true;  // everything preempted or waiting for blocks

  std::vector<size_t> first_row;
  model::Batch batch = BuildBatch(step, first_row);
  const size_t vocab = model_.config().vocab_size;
  logits_.resize(batch.logits_rows.size() * vocab);
  // Grammar masks depend only on tokens already appended: computed while the model runs.
  std::vector<SamplerState*> constrained;
  for (const ScheduledSeq& s : step.seqs)
    if (s.needs_logits && s.seq->sampler_state().grammar_active())
      constrained.push_back(&s.seq->sampler_state());
  grammar_masks_.Start(std::move(constrained));
  const auto forward_start = std::chrono::steady_clock::now();
  model_.Forward(batch, kv_, logits_.data());
  if (LogEnabled(LogLevel::kDebug)) {
    // One line per step (MOESERVE_LOG=debug): what the scheduler packed and what it cost.
    size_t decodes = 0;
    for (const ScheduledSeq& s : step.seqs) decodes += s.context_len >= s.seq->num_prompt_tokens();
    LogDebug(
        "step: ", step.seqs.size(), " sequences (", decodes, " decoding, ",
        step.seqs.size() - decodes, " computing prompt tokens), ", step.num_tokens,
        " tokens, forward ",
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - forward_start)
            .count(),
        " ms");
  }
  grammar_masks_.Wait();
  EmitPromptLogprobs(step, first_row, logits_.data());

  // Sample every sequence whose chunk reached its last token; its row is its last logits row.
  std::vector<int32_t> sampled;
  std::vector<std::optional<TokenLogprobs>> sampled_logprobs;
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    const ScheduledSeq& s = step.seqs[i];
    if (!s.needs_logits) continue;
    const size_t rows_of_seq =
        (s.seq->params().prompt_logprobs >= 0 && s.context_len < s.seq->num_prompt_tokens())
            ? s.num_new_tokens
            : 1;
    const float* row = logits_.data() + (first_row[i] + rows_of_seq - 1) * vocab;
    Sequence& seq = *s.seq;
    SampleResult r = sampler_.Sample(row, vocab, seq.params(), seq.sampler_state(),
                                     scheduler_.eos_token_ids(), seq.num_output_tokens());
    sampled.push_back(r.token);
    if (seq.params().logprobs >= 0) {
      sampled_logprobs.push_back(TokenLogprobs{r.token, r.logprob, std::move(r.top_logprobs)});
    } else {
      sampled_logprobs.push_back(std::nullopt);
    }
  }
  std::vector<SeqOutput> outputs = scheduler_.Postprocess(step, sampled);

  {
    std::lock_guard lock(mu_);
    ++stats_.steps;
    for (const ScheduledSeq& s : step.seqs) {
      if (s.context_len < s.seq->num_prompt_tokens())
        stats_.prompt_tokens +=
            std::min(s.num_new_tokens, s.seq->num_prompt_tokens() - s.context_len);
    }
    stats_.generation_tokens += outputs.size();
  }

  size_t k = 0;
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    if (!step.seqs[i].needs_logits) continue;
    const size_t sample_index = k++;
    Sequence* seq = step.seqs[i].seq;
    // Postprocess returns outputs in step order for the sequences that sampled.
    auto it = std::find_if(outputs.begin(), outputs.end(),
                           [&](const SeqOutput& o) { return o.seq == seq; });
    if (it == outputs.end()) continue;  // aborted meanwhile
    EngineOutput out;
    out.request_id = seq->id();
    out.new_tokens = {it->token};
    if (sampled_logprobs[sample_index]) out.new_logprobs = {*sampled_logprobs[sample_index]};
    if (auto pl = prompt_logprobs_.find(seq->id()); pl != prompt_logprobs_.end()) {
      out.prompt_logprobs = std::move(pl->second);
      prompt_logprobs_.erase(pl);
    }
    out.finished = it->finished;
    out.reason = it->reason;
    out.stop_token_id = seq->stop_token_id();
    out.num_prompt_tokens = seq->num_prompt_tokens();
    out.num_output_tokens = seq->num_output_tokens();
    out.num_cached_tokens = seq->num_cached_prompt_tokens();
    std::optional<std::string> stop;
    {
      std::lock_guard lock(sinks_mu_);
      auto sink_it = sinks_.find(seq->id());
      if (sink_it == sinks_.end()) continue;  // aborted: its blocks go at the next step
      stop = sink_it->second->OnOutput(out);
      if (out.finished || stop) sinks_.erase(sink_it);
    }
    if (!out.finished && stop) scheduler_.FinishSequence(seq->id(), FinishReason::kStop, *stop);
  }
  PublishStats();
  return true;
}

void LLMEngine::RunLoop() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      if (shutdown_) return;
      if (incoming_.empty() && aborts_.empty() && !scheduler_.HasUnfinished())
        wake_.wait(lock, [&] { return shutdown_ || !incoming_.empty() || !aborts_.empty(); });
      if (shutdown_) return;
    }
    Step();
  }
}

void LLMEngine::RunUntilIdle() {
  while (Step()) {
  }
}

void LLMEngine::PublishStats() {
  std::lock_guard lock(mu_);
  stats_.num_running = scheduler_.num_running();
  stats_.num_waiting = scheduler_.num_waiting();
  stats_.kv_blocks_total = scheduler_.block_manager().num_blocks();
  stats_.kv_blocks_used = scheduler_.block_manager().num_used_blocks();
  stats_.num_preemptions = scheduler_.num_preemptions();
  stats_.prefix_cache_hit_tokens = scheduler_.block_manager().stats().hit_tokens;
}

EngineStats LLMEngine::Stats() const {
  std::lock_guard lock(mu_);
  EngineStats s = stats_;
  s.num_waiting += incoming_.size();
  return s;
}

}  // namespace moeserve::engine
