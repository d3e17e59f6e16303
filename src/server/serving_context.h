// What every route handler needs: the engine, the tokenizer, the chat template, settings, metrics.
// Built once by `moeserve serve`; shared read-only by the HTTP threads (metrics and the id counter
// are internally synchronized).
#pragma once

#include <atomic>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "chat/chat_template.h"
#include "chat/reply_parser.h"
#include "engine/engine_interface.h"
#include "server/cors.h"
#include "server/metrics.h"
#include "server/request_limits.h"
#include "server/response_store.h"
#include "server/structured_output.h"
#include "tokenizer/tokenizer.h"

namespace moeserve::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string served_model_name;                  // the API's name of the model
  std::vector<std::string> served_model_aliases;  // further names requests may use
  std::string model_dir;
  std::string api_key;                // "" = no authentication
  size_t max_body_bytes = 32u << 20;  // larger bodies (Content-Length or chunked) get 413
  size_t http_threads = 64;           // workers for handlers that wait on the engine
  double drain_timeout_s = 30;        // graceful shutdown: wait this long for requests
  // Connection limits (HttpTransport): uvicorn's backlog, h11's 16 KB head, Apache's 100 fields.
  size_t max_connections = 2048;  // open at once; one more gets 503
  int backlog = 2048;             // listen queue
  size_t max_header_bytes = 16 << 10;
  size_t max_header_count = 100;
  double header_timeout_s = 20;     // the whole request head
  double body_timeout_s = 60;       // the whole request body
  double keep_alive_timeout_s = 5;  // idle connection between requests
  chat::ReasoningFormat reasoning = chat::ReasoningFormat::kNone;
  chat::ToolCallFormat tool_calls = chat::ToolCallFormat::kNone;
  // Defaults for omitted request fields, from generation_config.json (vLLM --generation-config
  // auto): temperature, top_p, top_k.
  std::optional<float> default_temperature, default_top_p;
  std::optional<int> default_top_k;
  RequestLimits limits;  // work one request may ask for (request_limits.h)
  CorsConfig cors;

  bool ServesModel(const std::string& name) const {
    if (name == served_model_name) return true;
    for (const std::string& alias : served_model_aliases)
      if (name == alias) return true;
    return false;
  }
};

struct ServingContext {
  ServingContext(engine::EngineInterface& e, const tokenizer::Tokenizer& t)
      : engine(e), tokenizer(t), structured_outputs(t) {}

  engine::EngineInterface& engine;
  const tokenizer::Tokenizer& tokenizer;
  // Compiled grammars of recent constraints and the vocabulary they are bound to (thread-safe).
  mutable StructuredOutputs structured_outputs;
  const chat::ChatTemplate* chat_template = nullptr;  // null: the chat route answers 400
  std::string bos_token, eos_token;                   // template variables
  // The most text bytes one token stands for (0: unknown). A text longer than max_model_len times
  // this cannot fit the context, so it is refused without tokenizing it.
  size_t max_bytes_per_token = 0;
  ServerConfig config;
  Metrics metrics;
  std::atomic<uint64_t> next_request_id{1};
  int64_t created_unix_s = 0;  // server start, for /v1/models
  ResponseStore responses;     // the Responses API's stored responses
  // Set when a graceful shutdown stops waiting: running requests are aborted.
  std::atomic<bool> abort_all{false};
};

}  // namespace moeserve::server
