// Route handlers of the OpenAI API and their shared helpers. Handlers throw ApiError for bad
// input; http_server.cc turns that into the error response.
#pragma once

#include <httplib.h>

#include <atomic>
#include <memory>
#include <string>

#include "server/client_connection.h"
#include "server/generation.h"
#include "server/request_parsing.h"
#include "server/serving_context.h"

namespace moeserve::server {

void HandleCompletions(ServingContext& ctx, const httplib::Request& req, httplib::Response& res);
void HandleChatCompletions(ServingContext& ctx, const httplib::Request& req,
                           httplib::Response& res);

// "prefix-" + 32 random hex digits.
std::string RandomId(const char* prefix);
int64_t UnixSeconds();
ClientConnection ConnectionOf(const httplib::Request& req);

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
// engine requests (and returns false) when the client disconnects or the server gives up.
template <typename F>
bool RunToEnd(ServingContext& ctx, Generation& gen, const ClientConnection& conn, F&& on_update) {
  while (!gen.done()) {
    for (ChoiceUpdate& u : gen.Next(std::chrono::milliseconds(50))) on_update(u);
    if (!gen.done() && (conn.Closed() || ctx.abort_all.load())) {
      gen.AbortAll();
      return false;
    }
  }
  return true;
}

// Streams SSE from a generation: `produce(updates, sink_write)` is called with each batch of
// updates and writes its events; `finish(write)` writes the last events ([DONE] included). The
// generation is aborted when a write fails, the client disconnects or the server gives up.
struct StreamState {
  std::unique_ptr<Generation> gen;
  ClientConnection conn;
};

template <typename Produce, typename Finish>
void StreamResponse(ServingContext& ctx, httplib::Response& res, std::shared_ptr<StreamState> st,
                    Produce produce, Finish finish) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [&ctx, st, produce, finish](size_t, httplib::DataSink& sink) mutable {
        auto write = [&sink](const std::string& s) { return sink.write(s.data(), s.size()); };
        while (!st->gen->done()) {
          std::vector<ChoiceUpdate> updates = st->gen->Next(std::chrono::milliseconds(50));
          if (!updates.empty() && !produce(updates, write)) {
            st->gen->AbortAll();
            return false;
          }
          if (!st->gen->done() && (st->conn.Closed() || ctx.abort_all.load())) {
            st->gen->AbortAll();
            return false;
          }
        }
        if (!finish(write)) return false;
        sink.done();
        return true;
      },
      [st](bool) { st->gen->AbortAll(); });
}

}  // namespace moeserve::server
