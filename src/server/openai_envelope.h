// The response envelope /v1/chat/completions and /v1/completions share:
//   whole:    {id, object, created, model, choices: [...], usage}
//   streamed: one chunk per choice update {id, object: <chunk object>, created, model,
//             choices: [one]}, then with stream_options.include_usage a chunk with no choices
//             carrying the usage, then `data: [DONE]`.
// The routes differ only in their choice objects (a ChoiceFormat).
#pragma once

#include <memory>
#include <string>

#include "server/response_writer.h"

namespace moeserve::server {

// What differs between chat and completions: the choice objects.
class ChoiceFormat {
 public:
  virtual ~ChoiceFormat() = default;
  // Streamed: choices sent before the first update (chat's role deltas).
  virtual std::vector<Json> StreamStart() { return {}; }
  // Streamed: the chunk's choice for an update, or null when the update says nothing.
  virtual Json ChunkChoice(ChoiceUpdate& u) = 0;
  // Whole: takes one update.
  virtual void Absorb(ChoiceUpdate& u) = 0;
  // Whole: choice `index` of the body.
  virtual Json FinalChoice(size_t index) = 0;
  // Whole: fields after usage (chat's prompt_logprobs).
  virtual void AddBodyFields(Json&) {}
};

struct EnvelopeFields {
  std::string id;
  std::string object;        // "chat.completion", "text_completion"
  std::string chunk_object;  // "chat.completion.chunk", "text_completion"
  int64_t created = 0;
  std::string model;
  bool include_usage = false;  // stream_options.include_usage
};

std::shared_ptr<ResponseWriter> MakeOpenAIWriter(EnvelopeFields fields,
                                                 std::unique_ptr<ChoiceFormat> format);

// {prompt_tokens, total_tokens, completion_tokens, prompt_tokens_details}
Json UsageJson(const TokenUsage& usage);
// vLLM's stop_reason of a finished choice: the stop string, the stop token id, or null.
Json StopReasonJson(const ChoiceUpdate& u);

}  // namespace moeserve::server
