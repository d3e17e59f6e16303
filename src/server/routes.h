// Route handlers of the OpenAI API and their shared helpers. Handlers throw ApiError for bad
// input; http_server.cc turns that into the error response.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "server/api_error.h"
#include "server/client_connection.h"
#include "server/generation.h"
#include "server/http_transport.h"
#include "server/request_parsing.h"
#include "server/serving_context.h"

namespace moeserve::server {

void HandleCompletions(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);
void HandleChatCompletions(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);
void HandleTokenize(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);    // vLLM's
void HandleDetokenize(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);  // vLLM's

// "prefix-" + 32 random hex digits.
std::string RandomId(const char* prefix);
int64_t UnixSeconds();

// `data: <json>\n\n`
inline std::string SseEvent(const Json& j) {
  return "data: " + DumpJson(j) + "\n\n";
}
inline const char* kSseDone = "data: [DONE]\n\n";

// The end of a streamed response (both endpoints): with stream_options.include_usage, a chunk with
// no choices carrying the usage, then [DONE]. False when the client has gone.
template <typename Write>
bool WriteSseStreamEnd(Write& write, const std::string& id, const char* object, int64_t created,
                       const std::string& model, bool include_usage, size_t prompt_tokens,
                       size_t completion_tokens);

inline Json Usage(size_t prompt_tokens, size_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"completion_tokens", completion_tokens}};
}

template <typename Write>
bool WriteSseStreamEnd(Write& write, const std::string& id, const char* object, int64_t created,
                       const std::string& model, bool include_usage, size_t prompt_tokens,
                       size_t completion_tokens) {
  if (include_usage && !write(SseEvent({{"id", id},
                                        {"object", object},
                                        {"created", created},
                                        {"model", model},
                                        {"choices", Json::array()},
                                        {"usage", Usage(prompt_tokens, completion_tokens)}})))
    return false;
  return write(kSseDone);
}

// Runs a non-streamed generation to the end, calling `on_update` for every update. Aborts the
// engine requests and returns false when the client disconnects; throws 503 when the server gives
// up (drain deadline).
template <typename F>
bool RunToEnd(ServingContext& ctx, Generation& gen, const ClientConnection& conn, F&& on_update) {
  while (!gen.done()) {
    for (ChoiceUpdate& u : gen.Next(std::chrono::milliseconds(50))) on_update(u);
    if (gen.done()) break;
    if (ctx.abort_all.load()) {
      gen.AbortAll();
      throw ApiError(503, "the server is shutting down: the request was aborted",
                     "service_unavailable");
    }
    if (conn.Closed()) {
      gen.AbortAll();
      return false;
    }
  }
  return true;
}

// An SSE body from a generation, pumped by the transport: `produce(updates, write)` writes the
// events of a batch of updates; `finish(write)` writes the last events ([DONE] included). At the
// drain deadline every unfinished choice gets a final chunk with finish_reason "abort", then
// `finish`. A client that goes away aborts the generation.
template <typename Produce, typename Finish>
class GenerationStream final : public StreamSource {
 public:
  GenerationStream(std::unique_ptr<Generation> gen, Produce produce, Finish finish)
      : gen_(std::move(gen)), produce_(std::move(produce)), finish_(std::move(finish)) {}

  bool Poll(std::string& out) override {
    auto write = [&out](const std::string& s) {
      out += s;
      return true;
    };
    std::vector<ChoiceUpdate> updates = gen_->Next(std::chrono::milliseconds(0));
    if (!updates.empty()) produce_(updates, write);
    if (!gen_->done()) return false;
    finish_(write);
    return true;
  }
  void Abort(std::string& out) override {
    if (Poll(out)) return;
    auto write = [&out](const std::string& s) {
      out += s;
      return true;
    };
    std::vector<ChoiceUpdate> last = gen_->AbortWithUpdates();
    produce_(last, write);
    finish_(write);
  }
  void Cancel() override { gen_->AbortAll(); }
  void SetWakeup(std::function<void()> wake) override { gen_->SetWakeup(std::move(wake)); }

 private:
  std::unique_ptr<Generation> gen_;
  Produce produce_;
  Finish finish_;
};

template <typename Produce, typename Finish>
void StreamResponse(HttpResponse& res, std::unique_ptr<Generation> gen, Produce produce,
                    Finish finish) {
  res.content_type = "text/event-stream";
  res.SetHeader("Cache-Control", "no-cache");
  res.stream = std::make_shared<GenerationStream<Produce, Finish>>(
      std::move(gen), std::move(produce), std::move(finish));
}

}  // namespace moeserve::server
