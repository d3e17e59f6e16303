// libFuzzer target: arbitrary request bodies through the handler of every POST route
// (/v1/completions, /v1/chat/completions, /tokenize, /detokenize: body parsing, the sampling,
// message, tool and prompt checks, chat-template rendering, tokenizing, the response, streamed or
// not) over the bundled tiny model's tokenizer and chat template and a ScriptedEngine (no model
// runs). The first byte picks the route, the rest is the body. Expected outcomes: a response, or an
// ApiError below 500 / a moeserve::Error (the server answers both with an error body). Anything
// else (crash, hang, sanitizer report, another exception, a 5xx) is a finding: in the server it
// would be a 500 or worse. Built by CMake with -DMOESERVE_FUZZ=ON (clang), run by CTest.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "chat/chat_template.h"
#include "core/check.h"
#include "engine/scripted_engine.h"
#include "model/registry.h"
#include "server/api_error.h"
#include "server/routes.h"
#include "server/serving_context.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace moeserve;

engine::ScriptedEngineConfig EngineConfig(const tokenizer::Tokenizer& tok,
                                          const model::ModelConfig& cfg) {
  engine::ScriptedEngineConfig c;
  // A short reply with reasoning and a tool call, so the reply parsers run on every request.
  c.reply = tok.Encode(
      "ok</think>\n\n<minimax:tool_call>\n<invoke name=\"f\">\n"
      "<parameter name=\"a\">1</parameter>\n</invoke>\n</minimax:tool_call>",
      /*add_special_tokens=*/false);
  c.eos_token_ids = cfg.eos_token_ids;
  c.vocab_size = cfg.vocab_size;
  // Small, so that ignore_eos with a large max_tokens still ends within a few dozen ticks.
  c.max_model_len = 64;
  c.tick = std::chrono::microseconds(0);
  return c;
}

struct Fixture {
  explicit Fixture(const std::string& dir)
      : cfg(model::LoadModelConfig(dir)),
        tok(tokenizer::Tokenizer::FromModelDir(dir)),
        chat_cfg(chat::LoadModelChatConfig(dir)),
        tmpl(chat::ChatTemplate::Parse(chat_cfg.chat_template)),
        eng(EngineConfig(tok, cfg)),
        ctx{eng, tok} {
    ctx.chat_template = &tmpl;
    ctx.bos_token = chat_cfg.bos_token;
    ctx.eos_token = chat_cfg.eos_token;
    ctx.max_bytes_per_token = 64;
    ctx.config.served_model_name = "tiny";
    ctx.config.model_dir = dir;
    ctx.config.reasoning = chat::ReasoningFormat::kThinkTags;
    ctx.config.tool_calls = chat::ToolCallFormat::kMiniMaxXml;
    ctx.config.limits.max_sequences = 8;  // bounds the work of one input (n, prompt lists)
  }
  model::ModelConfig cfg;
  tokenizer::Tokenizer tok;
  chat::ModelChatConfig chat_cfg;
  chat::ChatTemplate tmpl;
  engine::ScriptedEngine eng;
  server::ServingContext ctx;
};

Fixture& Get() {
  static Fixture* f = [] {
    const char* dir = std::getenv("MOESERVE_FUZZ_MODEL");
    return new Fixture(dir ? dir : MOESERVE_FUZZ_DEFAULT_MODEL);  // never destroyed: see below
  }();
  // Leaked on purpose: libFuzzer may exit from any thread, and the engine's thread must not be
  // joined during static destruction.
  return *f;
}

using Handler = void (*)(server::ServingContext&, const server::HttpRequest&,
                         server::HttpResponse&);
constexpr Handler kHandlers[] = {server::HandleCompletions, server::HandleChatCompletions,
                                 server::HandleTokenize, server::HandleDetokenize};

[[noreturn]] void Finding(const char* what) {
  std::fprintf(stderr, "request_fuzzer: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 16384) return 0;
  Fixture& f = Get();
  server::HttpRequest req;
  req.method = "POST";
  req.body.assign(reinterpret_cast<const char*>(data) + 1, size - 1);
  server::HttpResponse res;
  try {
    kHandlers[data[0] % std::size(kHandlers)](f.ctx, req, res);
    if (res.stream) {
      std::string out;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (!res.stream->Poll(out)) {
        if (std::chrono::steady_clock::now() > deadline) Finding("stream did not end in 30 s");
        std::this_thread::yield();
      }
    }
  } catch (const server::ApiError& e) {
    if (e.status() >= 500) Finding(e.what());
  } catch (const Error&) {
    // A moeserve::Error from a lower layer: the server answers 400 with its message.
  } catch (const std::exception& e) {
    Finding(e.what());  // the server would answer 500
  }
  if (res.status >= 500) Finding("a 5xx response");
  return 0;
}
