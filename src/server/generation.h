// One HTTP request's generation: its engine requests (one per prompt x sample, the OpenAI
// "choices"), the per-request sinks that turn tokens into text on the engine thread, and the
// channel the HTTP thread reads their updates from.
//
// Text rules (as vLLM): tokens are detokenized incrementally; special tokens are skipped when
// skip_special_tokens, except the tags a reply parser needs (`keep_token_ids`: <think>, tool-call
// delimiters), which vLLM's tokenizers do not mark special; the token that ended a request
// (EOS, a stop token id) is not detokenized unless include_stop_str_in_output; stop strings end the
// request and are cut from the text with everything after them (unless include_stop_str_in_output).
// Text that could still become a stop string is held back, so a stream never shows part of one.
//
// Threads: sinks run on the engine thread and never block (a mutex-guarded queue); everything
// else runs on one HTTP thread at a time (a worker starts it, the io thread may then stream it).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/engine_interface.h"
#include "server/serving_context.h"

namespace moeserve::server {

// What a choice produced since the last update.
struct ChoiceUpdate {
  size_t choice = 0;
  std::string text;                             // released text (never part of a stop string)
  std::vector<int32_t> tokens;                  // tokens generated in this update
  std::vector<engine::TokenLogprobs> logprobs;  // parallel to tokens when logprobs were asked
  std::vector<std::optional<engine::TokenLogprobs>> prompt_logprobs;  // first update only
  bool finished = false;
  std::string finish_reason;  // "stop", "length", "abort" when finished
  // vLLM's stop_reason, with finish_reason "stop": the stop string that matched, or the
  // stop_token_ids entry that was generated; neither for EOS.
  std::optional<std::string> stop_string;
  int32_t stop_token_id = -1;
  size_t prompt_tokens = 0, output_tokens = 0, cached_tokens = 0;
};

// Token counts of a whole request (OpenAI usage).
struct TokenUsage {
  size_t prompt_tokens = 0;      // each prompt once, whatever n
  size_t completion_tokens = 0;  // every choice's
  size_t cached_tokens = 0;      // prompt tokens the prefix cache served (first sample per prompt)
};

class UpdateChannel {
 public:
  void Push(ChoiceUpdate u);
  // Waits up to `timeout` for updates and takes them all (empty on timeout).
  std::vector<ChoiceUpdate> Take(std::chrono::milliseconds timeout);
  // Called (on the pushing thread, so it must be quick) after every Push; nullptr clears it.
  void SetNotify(std::function<void()> notify);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ChoiceUpdate> updates_;
  std::function<void()> notify_;
};

struct TextOptions {
  std::vector<std::string> stop;
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;
  std::set<int32_t> keep_token_ids;  // special tokens detokenized even when skipping specials
};

class Generation {
 public:
  explicit Generation(ServingContext& ctx);
  ~Generation();  // aborts every choice still running

  // Starts n choices per prompt (choice index = prompt_index * n + sample). With a seed, sample i
  // gets seed + i, as vLLM's parallel sampling. Throws ApiError (400) when the engine refuses one;
  // the choices already started are aborted.
  void Start(const std::vector<std::vector<int32_t>>& prompts, const engine::SamplingParams& params,
             const TextOptions& text);

  size_t num_choices() const { return engine_ids_.size(); }
  bool done() const { return num_finished_ == engine_ids_.size(); }
  // Updates since the last call (waits up to `timeout` when there are none).
  std::vector<ChoiceUpdate> Next(std::chrono::milliseconds timeout);
  // Ends every unfinished choice in the engine (client gone, shutdown); their KV blocks are freed.
  void AbortAll();
  // AbortAll, returning for each choice it ended the last update its client is owed: finished,
  // finish_reason "abort" (the server gives up on a stream at the drain deadline).
  std::vector<ChoiceUpdate> AbortWithUpdates();
  // `wake` runs on the engine thread whenever updates arrive (see UpdateChannel::SetNotify).
  void SetWakeup(std::function<void()> wake) { channel_->SetNotify(std::move(wake)); }
  // Token counts of the updates taken so far (complete once done()).
  const TokenUsage& usage() const { return usage_; }

 private:
  ServingContext& ctx_;
  std::shared_ptr<UpdateChannel> channel_;
  std::vector<uint64_t> engine_ids_;
  std::vector<bool> finished_;
  std::vector<double> first_token_s_;  // seconds after start, -1 until the first token
  size_t num_finished_ = 0;
  size_t samples_per_prompt_ = 1;
  std::vector<size_t> output_tokens_;  // per choice
  TokenUsage usage_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace moeserve::server
