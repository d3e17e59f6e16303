#include "server/generation.h"

#include "grammar/compiled_grammar.h"
#include "server/api_error.h"
#include "server/stop_matcher.h"

namespace moeserve::server {
namespace {

// Runs on the engine thread: detokenizes, finds stop strings, posts updates.
class ChoiceSink final : public engine::RequestSink {
 public:
  ChoiceSink(const tokenizer::Tokenizer& tok, const TextOptions& opts,
             std::shared_ptr<const StopPatterns> stops, size_t choice,
             std::shared_ptr<UpdateChannel> channel,
             std::shared_ptr<const grammar::CompiledGrammar> grammar)
      : tok_(tok),
        opts_(opts),
        detok_(tok, /*skip_special_tokens=*/false),
        stops_(std::move(stops)),
        choice_(choice),
        channel_(std::move(channel)),
        grammar_(std::move(grammar)) {}

  std::optional<std::string> OnOutput(const engine::EngineOutput& out) override {
    ChoiceUpdate u;
    u.choice = choice_;
    u.tokens = out.new_tokens;
    u.logprobs = out.new_logprobs;
    u.prompt_logprobs = out.prompt_logprobs;
    u.prompt_tokens = out.num_prompt_tokens;
    u.output_tokens = out.num_output_tokens;
    u.cached_tokens = out.num_cached_tokens;
    // The token that ended the request with "stop" is an EOS or stop token id: not text, unless
    // include_stop_str_in_output (vLLM's detokenizer; an EOS is then still a special token).
    // Under a grammar, "stop" may also be the grammar's end, on an ordinary token: that is text.
    const int32_t last = out.new_tokens.empty() ? -1 : out.new_tokens.back();
    const bool stopped_by_token =
        !grammar_ || grammar_->vocabulary().is_stop(last) || out.stop_token_id == last;
    const bool terminal_token = out.finished && out.reason == engine::FinishReason::kStop &&
                                stopped_by_token && !opts_.include_stop_str_in_output;
    std::string fresh;
    for (size_t i = 0; i < out.new_tokens.size(); ++i) {
      const int32_t t = out.new_tokens[i];
      if (terminal_token && i + 1 == out.new_tokens.size()) continue;
      if (opts_.skip_special_tokens && tok_.IsSpecial(t) && !opts_.keep_token_ids.count(t))
        continue;
      fresh += detok_.Push(t);
    }
    if (out.finished) fresh += detok_.Flush();
    std::optional<std::string> hit = Release(fresh, out.finished, u.text);
    if (hit) {
      u.finished = true;
      u.finish_reason = "stop";
      u.stop_string = *hit;
    } else if (out.finished) {
      u.finished = true;
      u.finish_reason = engine::FinishReasonName(out.reason);
      if (out.reason == engine::FinishReason::kStop) u.stop_token_id = out.stop_token_id;
    }
    channel_->Push(std::move(u));
    return hit;
  }

 private:
  // Appends `fresh` to the pending text and moves what can no longer become part of a stop
  // string into `text`. Returns the stop string when one is complete (the text after it is
  // dropped). The matcher sees each byte once, so the cost per token is bounded by the stop-string
  // limits whatever the held-back length.
  std::optional<std::string> Release(const std::string& fresh, bool final, std::string& text) {
    const size_t before = pending_.size();
    pending_ += fresh;
    if (std::optional<StopMatcher::Hit> hit = matcher_.Feed(fresh)) {
      const std::string& stop = stops_->stop(hit->stop_index);
      const size_t end = before + hit->end;
      text += pending_.substr(0, opts_.include_stop_str_in_output ? end : end - stop.size());
      pending_.clear();
      return stop;
    }
    const size_t keep = final ? 0 : matcher_.HeldBack();
    text += pending_.substr(0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
    return std::nullopt;
  }

  const tokenizer::Tokenizer& tok_;
  const TextOptions opts_;
  tokenizer::StreamingDetokenizer detok_;
  std::shared_ptr<const StopPatterns> stops_;
  StopMatcher matcher_{stops_};
  const size_t choice_;
  std::shared_ptr<UpdateChannel> channel_;
  std::shared_ptr<const grammar::CompiledGrammar> grammar_;  // the request's, or null
  std::string pending_;  // decoded text not yet released (a possible stop-string prefix)
};

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

void UpdateChannel::Push(ChoiceUpdate u) {
  {
    std::lock_guard lock(mu_);
    updates_.push_back(std::move(u));
    if (notify_) notify_();
  }
  cv_.notify_one();
}

void UpdateChannel::SetNotify(std::function<void()> notify) {
  std::lock_guard lock(mu_);
  notify_ = std::move(notify);
}

std::vector<ChoiceUpdate> UpdateChannel::Take(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !updates_.empty(); });
  std::vector<ChoiceUpdate> out;
  out.swap(updates_);
  return out;
}

Generation::Generation(ServingContext& ctx)
    : ctx_(ctx),
      channel_(std::make_shared<UpdateChannel>()),
      start_(std::chrono::steady_clock::now()) {}

Generation::~Generation() {
  channel_->SetNotify(nullptr);  // the engine's sinks may outlive this; the waker must not
  AbortAll();
}

void Generation::Start(const std::vector<std::vector<int32_t>>& prompts,
                       const engine::SamplingParams& params, const TextOptions& text) {
  const int n = params.n;
  samples_per_prompt_ = static_cast<size_t>(n);
  for (const auto& p : prompts) usage_.prompt_tokens += p.size();
  // Built once here (HTTP thread), shared by every choice's matcher on the engine thread.
  auto stops = std::make_shared<const StopPatterns>(text.stop);
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (int i = 0; i < n; ++i) {
      engine::SamplingParams sp = params;
      sp.n = 1;
      if (sp.seed) sp.seed = *sp.seed + static_cast<uint64_t>(i);
      const size_t choice = engine_ids_.size();
      const uint64_t id = ctx_.next_request_id.fetch_add(1);
      auto sink =
          std::make_shared<ChoiceSink>(ctx_.tokenizer, text, stops, choice, channel_, sp.grammar);
      std::string err = ctx_.engine.AddRequest(id, prompts[p], sp, std::move(sink));
      if (!err.empty()) {
        AbortAll();
        throw BadRequest(prompts.size() > 1 ? "prompt " + std::to_string(p) + ": " + err : err);
      }
      engine_ids_.push_back(id);
      finished_.push_back(false);
      first_token_s_.push_back(-1);
      output_tokens_.push_back(0);
    }
  }
}

std::vector<ChoiceUpdate> Generation::Next(std::chrono::milliseconds timeout) {
  std::vector<ChoiceUpdate> updates = channel_->Take(timeout);
  for (const ChoiceUpdate& u : updates) {
    if (finished_[u.choice]) continue;
    if (u.output_tokens > output_tokens_[u.choice]) {
      usage_.completion_tokens += u.output_tokens - output_tokens_[u.choice];
      output_tokens_[u.choice] = u.output_tokens;
    }
    if (!u.tokens.empty() && first_token_s_[u.choice] < 0) {
      first_token_s_[u.choice] = SecondsSince(start_);
      // Each prompt's first sample is the one admitted first: its hits are the prompt's.
      if (u.choice % samples_per_prompt_ == 0) usage_.cached_tokens += u.cached_tokens;
    }
    if (u.finished) {
      finished_[u.choice] = true;
      ++num_finished_;
      ctx_.metrics.RecordRequest({engine_ids_[u.choice], u.finish_reason, first_token_s_[u.choice],
                                  SecondsSince(start_), u.prompt_tokens, u.output_tokens,
                                  u.cached_tokens});
    }
  }
  return updates;
}

std::vector<ChoiceUpdate> Generation::AbortWithUpdates() {
  std::vector<ChoiceUpdate> out;
  for (size_t i = 0; i < engine_ids_.size(); ++i) {
    if (finished_[i]) continue;
    ChoiceUpdate u;
    u.choice = i;
    u.finished = true;
    u.finish_reason = "abort";
    out.push_back(std::move(u));
  }
  AbortAll();
  return out;
}

void Generation::AbortAll() {
  for (size_t i = 0; i < engine_ids_.size(); ++i) {
    if (finished_[i]) continue;
    ctx_.engine.Abort(engine_ids_[i]);
    finished_[i] = true;
    ++num_finished_;
    ctx_.metrics.RecordRequest({engine_ids_[i], "abort", first_token_s_[i], SecondsSince(start_)});
  }
}

}  // namespace moeserve::server
