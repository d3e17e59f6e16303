// The last stage of every generating route: a ResponseWriter turns a Generation's updates into
// the route's response, whole (one JSON body once every choice finished) or streamed (SSE events
// as updates arrive). The routes differ only in their writer: OpenAI chat and completions share
// one envelope (openai_envelope.h), the Anthropic and Responses APIs have their own.
//
// Threads: a writer is used by one HTTP thread at a time (a worker for whole responses, the io
// thread's stream pump for streams).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/generation.h"
#include "server/http_transport.h"
#include "server/serving_context.h"

namespace moeserve::server {

using Json = nlohmann::ordered_json;

class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  // Whole response: takes one update.
  virtual void Absorb(ChoiceUpdate& u) = 0;
  // Whole response: the body, once every choice finished.
  virtual Json Body(const Generation& gen) = 0;
  // Streamed: appends the SSE events of a batch of updates to `out`.
  virtual void Stream(std::vector<ChoiceUpdate>& updates, const Generation& gen,
                      std::string& out) = 0;
  // Streamed: appends the closing events (after the last update, or at the drain deadline after
  // a final "abort" update per unfinished choice).
  virtual void StreamEnd(const Generation& gen, std::string& out) = 0;
};

// Sends `gen`'s response through `writer`: SSE when `stream`, else one JSON body once the
// generation ends (status 499, nobody reading, when the client left; 503 at the drain deadline).
void Respond(ServingContext& ctx, const HttpRequest& req, HttpResponse& res,
             std::unique_ptr<Generation> gen, std::shared_ptr<ResponseWriter> writer, bool stream);

// `data: <json>\n\n`
inline std::string SseEvent(const Json& j) {
  return "data: " + DumpJson(j) + "\n\n";
}
// `event: <name>\ndata: <json>\n\n` (the Anthropic and Responses streams name their events).
inline std::string NamedSseEvent(const std::string& name, const Json& j) {
  return "event: " + name + "\ndata: " + DumpJson(j) + "\n\n";
}
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

// `prefix` + 32 random hex digits ("chatcmpl-", "msg_", "resp_").
std::string RandomId(const char* prefix);
int64_t UnixSeconds();

}  // namespace moeserve::server
