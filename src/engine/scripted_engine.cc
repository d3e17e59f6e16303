#include "engine/scripted_engine.h"

#include <algorithm>

#include "core/check.h"

namespace moeserve::engine {

ScriptedEngine::ScriptedEngine(ScriptedEngineConfig config) : config_(std::move(config)) {
  stats_.kv_blocks_total = config_.num_kv_blocks;
  thread_ = std::thread([this] { Run(); });
}

ScriptedEngine::~ScriptedEngine() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::string ScriptedEngine::AddRequest(uint64_t id, std::vector<int32_t> prompt,
                                       SamplingParams params, std::shared_ptr<RequestSink> sink) {
  if (std::string e = params.Validate(config_.vocab_size); !e.empty()) return e;
  if (prompt.empty()) return "the prompt is empty";
  for (int32_t t : prompt)
    if (t < 0 || static_cast<size_t>(t) >= config_.vocab_size)
      return detail::Concat("token id ", t, " is outside the vocabulary [0, ", config_.vocab_size,
                            ")");
  if (params.max_tokens < 1)
    return detail::Concat("max_tokens must be at least 1, got ", params.max_tokens);
  if (prompt.size() + static_cast<size_t>(params.max_tokens) > config_.max_model_len)
    return detail::Concat("This model's maximum context length is ", config_.max_model_len,
                          " tokens. However, you requested ",
                          prompt.size() + static_cast<size_t>(params.max_tokens), " tokens (",
                          prompt.size(), " in the messages, ", params.max_tokens,
                          " in the completion).");
  {
    std::lock_guard lock(mu_);
    if (requests_.count(id)) return detail::Concat("request id ", id, " is in use");
    Request r{std::move(prompt), std::move(params), std::move(sink)};
    stats_.prompt_tokens += r.prompt.size();
    requests_.emplace(id, std::move(r));
  }
  wake_.notify_one();
  return "";
}

void ScriptedEngine::Abort(uint64_t id) {
  std::unique_lock lock(mu_);
  if (requests_.erase(id) == 0 && advancing_ == id) {
    advancing_aborted_ = true;
    // The sink is running on the engine thread: wait until that call is over (the contract).
    advanced_.wait(lock, [&] { return advancing_ != id; });
  }
}

size_t ScriptedEngine::BlocksOf(const Request& r) const {
  return (r.prompt.size() + r.num_output + config_.block_size - 1) / config_.block_size;
}

EngineStats ScriptedEngine::Stats() const {
  std::lock_guard lock(mu_);
  EngineStats s = stats_;
  s.num_running = requests_.size();
  s.kv_blocks_used = 0;
  for (const auto& [id, r] : requests_) s.kv_blocks_used += BlocksOf(r);
  return s;
}

bool ScriptedEngine::Advance(uint64_t id, Request& r) {
  const SamplingParams& p = r.params;
  const auto is_eos = [&](int32_t t) {
    return std::find(config_.eos_token_ids.begin(), config_.eos_token_ids.end(), t) !=
           config_.eos_token_ids.end();
  };
  int32_t token = -1;
  if (r.num_output < config_.reply.size()) {
    token = config_.reply[r.num_output];
  } else if (!config_.eos_token_ids.empty()) {
    token = config_.eos_token_ids.front();
  }
  EngineOutput out;
  out.request_id = id;
  out.num_prompt_tokens = r.prompt.size();
  if (r.first && p.prompt_logprobs >= 0) {
    out.prompt_logprobs.resize(r.prompt.size());
    for (size_t i = 1; i < r.prompt.size(); ++i) {
      TokenLogprobs lp{r.prompt[i], 0.0f, {}};
      if (p.prompt_logprobs > 0) lp.top = {{r.prompt[i], 0.0f}};
      out.prompt_logprobs[i] = lp;
    }
  }
  r.first = false;
  if (token >= 0) {
    ++r.num_output;
    out.new_tokens = {token};
    if (p.logprobs >= 0) {
      TokenLogprobs lp{token, 0.0f, {}};
      if (p.logprobs > 0) lp.top = {{token, 0.0f}};
      out.new_logprobs = {lp};
    }
    const bool counts = static_cast<int>(r.num_output) > p.min_tokens;
    const bool stop_id = std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) !=
                         p.stop_token_ids.end();
    if (counts && ((is_eos(token) && !p.ignore_eos) || stop_id)) {
      out.finished = true;
      out.reason = FinishReason::kStop;
      if (stop_id) out.stop_token_id = token;
    } else if (static_cast<int>(r.num_output) >= p.max_tokens ||
               r.prompt.size() + r.num_output >= config_.max_model_len) {
      out.finished = true;
      out.reason = FinishReason::kLength;
    }
  } else {
    out.finished = true;
    out.reason = FinishReason::kStop;
  }
  out.num_output_tokens = r.num_output;
  std::optional<std::string> stop = r.sink->OnOutput(out);
  return out.finished || stop.has_value();
}

void ScriptedEngine::Run() {
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !requests_.empty(); });
    if (stop_) return;
    // One tick: every request advances by one token. Sinks run without the lock so that Abort
    // and AddRequest from other threads never wait on them.
    std::vector<uint64_t> ids;
    for (const auto& [id, r] : requests_) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    for (uint64_t id : ids) {
      auto it = requests_.find(id);
      if (it == requests_.end()) continue;  // aborted meanwhile
      Request r = std::move(it->second);
      requests_.erase(it);
      advancing_ = id;
      advancing_aborted_ = false;
      lock.unlock();
      const bool done = Advance(id, r);
      lock.lock();
      ++stats_.generation_tokens;
      advancing_.reset();
      advanced_.notify_all();
      // An Abort(id) that arrived while the sink ran must still win.
      if (!done && !advancing_aborted_) requests_.emplace(id, std::move(r));
    }
    ++stats_.steps;
    wake_.wait_for(lock, config_.tick, [&] { return stop_; });
  }
}

}  // namespace moeserve::engine
