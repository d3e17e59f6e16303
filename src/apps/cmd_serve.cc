// moeserve serve: the OpenAI-compatible HTTP server (`vllm serve` flags where they make sense on
// CPUs). The engine loop runs on its own thread; HTTP threads only queue requests and read their
// outputs (DESIGN.md).
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <sstream>
#include <thread>

#include "apps/command_registry.h"
#include "apps/model_options.h"
#include "apps/model_session.h"
#include "apps/vllm_compat.h"
#include "chat/chat_template.h"
#include "chat/parser_registry.h"
#include "core/check.h"
#include "core/log.h"
#include "engine/llm_engine.h"
#include "engine/scripted_engine.h"
#include "model/registry.h"
#include "server/http_server.h"
#include "server/memory_release.h"
#include "server/metrics.h"

namespace moeserve::apps {
namespace {

struct ServeOptions {
  ModelOptions model;
  std::string model_tag;  // vLLM's positional model: `moeserve serve /models/X`
  CLI::Option* model_flag = nullptr;
  std::vector<std::string> served_model_names;
  VllmFlagSet vllm_flags;
  std::string allowed_origins, allowed_methods, allowed_headers;  // JSON lists, as vLLM
  ParallelOptions parallel;
  server::ServerConfig server;
  std::string kv_cache_dtype = "auto";
  size_t max_model_len = 0;  // 0 = min(max_position_embeddings, what the KV cache holds)
  double memory_utilization = 0.9;
  size_t kv_cache_memory_bytes = 0;  // 0 = from memory_utilization
  size_t max_num_seqs = 256;
  size_t max_num_batched_tokens = 2048;
  size_t long_prefill_token_threshold = 0;
  size_t max_num_prefills_while_decoding = 1;
  size_t block_size = 16;
  bool no_prefix_caching = false;
  std::string chat_template;  // a file, or the template itself (vLLM's rule)
  std::string reasoning_parser = "auto";
  std::string tool_call_parser = "auto";
  uint64_t seed = 0;
  bool disable_log_requests = false, disable_log_stats = false;
  std::string scripted_output;  // test-only: replay this text instead of running the model
  double scripted_tick_ms = 2;
};

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) Fail("cannot read ", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

size_t PhysicalMemoryBytes() {
  return static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// An upper bound on the text bytes one token covers: the longest decoded token, times 4 for
// normalizers that shrink text before tokenizing (NFC composes 3-byte sequences into 2 bytes).
// A prompt longer than max_model_len times this is refused before it is tokenized.
size_t MaxBytesPerToken(const tokenizer::Tokenizer& tok) {
  size_t longest = 1;
  for (size_t id = 0; id < tok.VocabSize(); ++id) {
    const int32_t one[] = {static_cast<int32_t>(id)};
    longest = std::max(longest, tok.Decode(one, /*skip_special_tokens=*/false).size());
  }
  return 4 * longest;
}

// The model as a request names it: --served-model-name's names, or vLLM's default (the --model
// string as given) plus the folder's name, which earlier moeserve versions used.
void ChooseServedNames(const ServeOptions& o, server::ServerConfig& c) {
  std::vector<std::string> names = o.served_model_names;
  if (names.empty()) {
    names.push_back(o.model.model_dir);
    const std::filesystem::path p = std::filesystem::path(o.model.model_dir).lexically_normal();
    std::string base = p.filename().string();
    if (base.empty()) base = p.parent_path().filename().string();
    if (!base.empty() && base != names[0]) names.push_back(base);
  }
  c.served_model_name = names[0];
  c.served_model_aliases.assign(names.begin() + 1, names.end());
}

// --allowed-origins '["https://a.example"]': vLLM parses these as JSON lists. A bare word is
// taken as a list of one.
std::vector<std::string> ParseCorsList(const std::string& flag, const std::string& value,
                                       std::vector<std::string> fallback) {
  if (value.empty()) return fallback;
  const nlohmann::json j = nlohmann::json::parse(value, nullptr, false);
  if (j.is_discarded() || j.is_string()) return {j.is_string() ? j.get<std::string>() : value};
  std::vector<std::string> out;
  if (j.is_array())
    for (const auto& x : j)
      if (x.is_string()) out.push_back(x.get<std::string>());
  if (!j.is_array() || out.size() != j.size())
    Fail(flag, " must be a JSON list of strings, e.g. '[\"*\"]', got ", value);
  return out;
}

// --max-model-len past the model's positions gives garbage (RoPE beyond what it was trained
// for), so vLLM refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; so does moeserve.
void CheckMaxModelLen(size_t max_model_len, size_t max_position_embeddings) {
  if (max_model_len <= max_position_embeddings) return;
  const char* allow = std::getenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN");
  const bool allowed = allow && (std::string(allow) == "1" || std::string(allow) == "true");
  if (!allowed)
    Fail("--max-model-len ", max_model_len, " is greater than the model's max_position_embeddings ",
         max_position_embeddings,
         " (config.json); positions past it give wrong results. To allow "
         "it anyway, set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1");
  LogWarn("--max-model-len ", max_model_len, " is greater than max_position_embeddings ",
          max_position_embeddings, ", allowed by VLLM_ALLOW_LONG_MAX_MODEL_LEN");
}

// Parsers by vLLM's names (chat/parser_registry.h); "auto" is the architecture's default.
void ChooseParsers(const ServeOptions& o, const std::string& arch, server::ServerConfig& c) {
  const model::Architecture& a = model::FindArchitecture(arch);
  const std::string r =
      o.reasoning_parser == "auto" ? a.default_reasoning_parser : o.reasoning_parser;
  const std::string t =
      o.tool_call_parser == "auto" ? a.default_tool_call_parser : o.tool_call_parser;
  const chat::ReasoningParserInfo* reasoning = chat::FindReasoningParser(r);
  const chat::ToolCallParserInfo* tools = chat::FindToolCallParser(t);
  MOESERVE_CHECK(reasoning && tools, arch, " names parsers ", r, " / ", t,
                 " that chat/parser_registry.cc lacks");
  c.reasoning = reasoning->format;
  c.tool_calls = tools->format;
  LogInfo("reasoning parser: ", r, ", tool-call parser: ", t);
}

std::vector<std::string> WithAuto(std::vector<std::string> names) {
  names.insert(names.begin(), "auto");
  return names;
}

// generation_config.json defaults for omitted request fields (vLLM --generation-config auto).
void ReadGenerationDefaults(const std::string& dir, server::ServerConfig& c) {
  const std::string path = dir + "/generation_config.json";
  if (!std::filesystem::exists(path)) return;
  const nlohmann::json g = nlohmann::json::parse(ReadFile(path), nullptr, false);
  if (!g.is_object()) return;
  if (g.contains("temperature") && g["temperature"].is_number())
    c.default_temperature = g["temperature"].get<float>();
  if (g.contains("top_p") && g["top_p"].is_number()) c.default_top_p = g["top_p"].get<float>();
  if (g.contains("top_k") && g["top_k"].is_number_integer())
    c.default_top_k = g["top_k"].get<int>();
}

// VLLM_LOG_STATS_INTERVAL (vLLM's variable): seconds between stats lines, default 10.
double StatsIntervalSeconds() {
  const char* v = std::getenv("VLLM_LOG_STATS_INTERVAL");
  const double s = v ? std::atof(v) : 10;
  return s > 0 ? s : 10;
}

// Serves until SIGINT/SIGTERM, then drains. The signals are blocked in every thread and taken
// by a watcher thread, so the handlers never run async-signal-unsafe code.
int ServeUntilSignal(server::HttpServer& http) {
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    timespec poll_interval{0, 100 * 1000 * 1000};
    while (!done.load()) {
      const int sig = sigtimedwait(&set, nullptr, &poll_interval);
      if (sig == SIGINT || sig == SIGTERM) {
        LogInfo("signal ", sig, ": draining (no new requests; running ones finish)");
        http.RequestShutdown();
        return;
      }
    }
  });
  int rc = 0;
  try {
    http.Run();
  } catch (const Error& e) {
    LogError(e.what());
    rc = 1;
  }
  done = true;
  watcher.join();
  return rc;
}

int RunServe(ServeOptions& o) {
  // Before any thread starts: every thread inherits the mask.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not kill the server
  server::ConfigureMallocForServing();
  LogInfo("malloc: ", server::AllocatorName());

  if (!o.model_tag.empty()) {
    if (o.model_flag->count() > 0 && o.model.model_dir != o.model_tag)
      Fail("the model is given twice: ", o.model_tag, " and --model ", o.model.model_dir);
    o.model.model_dir = o.model_tag;
  }
  const DType kv_dtype = ParseKvCacheDtype(o.kv_cache_dtype);
  if (!(o.memory_utilization > 0 && o.memory_utilization <= 1))
    Fail("--gpu-memory-utilization must be in (0, 1], got ", o.memory_utilization);
  const std::string dir = o.model.model_dir;
  o.vllm_flags.Check(dir);
  server::ServerConfig& sc = o.server;
  sc.model_dir = dir;
  ChooseServedNames(o, sc);
  for (const char* env : {"MOESERVE_API_KEY", "VLLM_API_KEY"})
    if (const char* k = std::getenv(env); sc.api_key.empty() && k) sc.api_key = k;
  sc.http_threads = std::max<size_t>(sc.http_threads, o.max_num_seqs + 8);
  sc.cors.allowed_origins = ParseCorsList("--allowed-origins", o.allowed_origins, {"*"});
  sc.cors.allowed_methods = ParseCorsList("--allowed-methods", o.allowed_methods, {"*"});
  sc.cors.allowed_headers = ParseCorsList("--allowed-headers", o.allowed_headers, {"*"});

  const model::ModelConfig cfg = model::LoadModelConfig(dir);
  CheckMaxModelLen(o.max_model_len, cfg.max_position_embeddings);
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::FromModelDir(dir);
  ChooseParsers(o, cfg.architecture, sc);
  ReadGenerationDefaults(dir, sc);
  std::optional<chat::ChatTemplate> tmpl;
  chat::ModelChatConfig chat_cfg;
  try {
    chat_cfg = chat::LoadModelChatConfig(dir);
  } catch (const Error& e) {
    if (o.chat_template.empty()) LogWarn("no chat template: ", e.what());
  }
  if (!o.chat_template.empty()) chat_cfg.chat_template = ResolveChatTemplate(o.chat_template);
  if (!chat_cfg.chat_template.empty()) tmpl = chat::ChatTemplate::Parse(chat_cfg.chat_template);

  std::unique_ptr<ModelSession> session;
  std::unique_ptr<engine::EngineInterface> eng;
  std::function<void()> stop_engine = [] {};
  std::thread engine_thread;
  if (!o.scripted_output.empty()) {
    engine::ScriptedEngineConfig ec;
    ec.reply = tok.Encode(ReadFile(o.scripted_output), /*add_special_tokens=*/false);
    ec.eos_token_ids = cfg.eos_token_ids;
    ec.vocab_size = cfg.vocab_size;
    ec.max_model_len = o.max_model_len ? o.max_model_len : cfg.max_position_embeddings;
    ec.block_size = o.block_size;
    ec.tick = std::chrono::microseconds(static_cast<int64_t>(o.scripted_tick_ms * 1000));
    LogInfo("scripted engine: every request replays ", ec.reply.size(), " tokens");
    eng = std::make_unique<engine::ScriptedEngine>(std::move(ec));
  } else {
    session = ModelSession::Open(o.model, o.parallel);
    if (session->is_worker()) return 0;
    model::Model& m = session->model();
    model::KvLayout layout = m.kv_layout();
    layout.dtype = kv_dtype;
    const size_t weights = m.WeightBytes();
    size_t kv_bytes = o.kv_cache_memory_bytes;
    if (kv_bytes == 0) {
      const double budget = o.memory_utilization * static_cast<double>(PhysicalMemoryBytes());
      if (budget <= static_cast<double>(weights))
        Fail("--gpu-memory-utilization ", o.memory_utilization, " of ", PhysicalMemoryBytes(),
             " bytes leaves nothing for the KV cache after ", weights, " bytes of weights");
      kv_bytes = static_cast<size_t>(budget) - weights;
    }
    size_t blocks = cache::KvPool::BlocksForBytes(layout, o.block_size, kv_bytes);
    const size_t tokens_fit = blocks * o.block_size;
    size_t max_len = o.max_model_len;
    if (max_len == 0) max_len = std::min(cfg.max_position_embeddings, tokens_fit);
    if (max_len == 0 || max_len > tokens_fit)
      Fail("--max-model-len ", max_len, " does not fit the KV cache, which holds ", tokens_fit,
           " tokens (", kv_bytes, " bytes); raise --kv-cache-memory or --gpu-memory-utilization");
    // More blocks than max_num_seqs full-length sequences can use would only reserve memory.
    const size_t useful = o.max_num_seqs * ((max_len + o.block_size - 1) / o.block_size);
    blocks = std::min(blocks, useful);
    LogInfo("weights: ", weights, " bytes; KV cache: ", blocks, " blocks of ", o.block_size,
            " tokens = ", blocks * o.block_size, " tokens, ",
            blocks * o.block_size * layout.BytesPerToken(), " bytes; max_model_len ", max_len);
    engine::EngineConfig ec;
    ec.kv_cache_dtype = kv_dtype;
    ec.scheduler.eos_token_ids = cfg.eos_token_ids;
    ec.scheduler.max_model_len = max_len;
    ec.scheduler.num_kv_blocks = blocks;
    ec.scheduler.block_size = o.block_size;
    ec.scheduler.max_num_seqs = o.max_num_seqs;
    ec.scheduler.max_num_batched_tokens = o.max_num_batched_tokens;
    ec.scheduler.long_prefill_token_threshold = o.long_prefill_token_threshold;
    ec.scheduler.max_num_prefills_while_decoding = o.max_num_prefills_while_decoding;
    ec.scheduler.prefix_caching = !o.no_prefix_caching;
    ec.scheduler.seed = o.seed;
    auto llm = std::make_unique<engine::LLMEngine>(m, ec, session->context());
    engine::LLMEngine* raw = llm.get();
    // The warm-up runs on the engine thread, before its loop: the kernels' scratch buffers are
    // thread-local, so a warm-up here on the main thread sized the main thread's copies (kept
    // for nothing) and left the engine thread's to grow under traffic: the soak's idle RSS
    // stepped up ~13 MB at its first burst of arrivals (issue 14).
    std::promise<void> warmed;
    std::future<void> warm_done = warmed.get_future();
    engine_thread = std::thread([raw, &warmed] {
      try {
        raw->WarmUp();
      } catch (...) {
        warmed.set_exception(std::current_exception());
        return;
      }
      warmed.set_value();
      raw->RunLoop();
    });
    try {
      warm_done.get();
    } catch (...) {
      engine_thread.join();
      throw;
    }
    stop_engine = [raw] { raw->Shutdown(); };
    eng = std::move(llm);
  }

  server::ServingContext ctx{*eng, tok};
  ctx.chat_template = tmpl ? &*tmpl : nullptr;
  ctx.bos_token = chat_cfg.bos_token;
  ctx.eos_token = chat_cfg.eos_token;
  ctx.max_bytes_per_token = MaxBytesPerToken(tok);
  ctx.config = sc;
  ctx.created_unix_s = static_cast<int64_t>(std::time(nullptr));
  ctx.metrics.set_log_requests(!o.disable_log_requests);
  int rc = 0;
  {
    std::optional<server::PeriodicStatsLog> stats_log;
    if (!o.disable_log_stats) stats_log.emplace(*eng, StatsIntervalSeconds());
    server::HttpServer http(ctx);
    rc = ServeUntilSignal(http);
  }
  stop_engine();
  if (engine_thread.joinable()) engine_thread.join();
  LogInfo("server stopped");
  return rc;
}

CommandRegistration reg{
    "serve", "Serve a model over the OpenAI API (completions, chat completions, SSE)",
    [](CLI::App& sub) -> CommandAction {
      auto o = std::make_shared<ServeOptions>();
      AddModelOptions(sub, o->model, BundledModelDir());
      o->model_flag = sub.get_option("--model");
      sub.add_option("model_tag", o->model_tag,
                     "Model folder, as `vllm serve MODEL` (instead of --model)");
      AddParallelOptions(sub, o->parallel);
      auto& s = o->server;
      sub.add_option("--host", s.host, "Address to listen on")->capture_default_str();
      sub.add_option("--port,--server-port", s.port, "Port (0 = any free port)")
          ->capture_default_str();
      sub.add_option("--served-model-name", o->served_model_names,
                     "Names of the model in the API; responses use the first, requests may use "
                     "any (default: the --model string as given, and the folder's name)")
          ->expected(1, 1 << 16);
      sub.add_option("--api-key", s.api_key,
                     "Require 'Authorization: Bearer KEY' on every route but /health, /metrics, "
                     "/version (also env MOESERVE_API_KEY or VLLM_API_KEY)");
      sub.add_option("--chat-template", o->chat_template,
                     "Jinja chat template: a file, or the template itself when it is no file "
                     "and contains { } or a newline (default: the model's tokenizer_config.json)");
      sub.add_option("--allowed-origins", o->allowed_origins,
                     "CORS: origins allowed, a JSON list (default [\"*\"])");
      sub.add_option("--allowed-methods", o->allowed_methods,
                     "CORS: methods allowed, a JSON list (default [\"*\"])");
      sub.add_option("--allowed-headers", o->allowed_headers,
                     "CORS: request headers allowed, a JSON list (default [\"*\"])");
      sub.add_flag("--allow-credentials", s.cors.allow_credentials,
                   "CORS: allow credentials (cookies, authorization)");
      sub.add_option("--reasoning-parser", o->reasoning_parser,
                     "Splits reasoning from content (vLLM's names):\n  auto: the model "
                     "architecture's default" +
                         chat::DescribeReasoningParsers())
          ->check(CLI::IsMember(WithAuto(chat::ReasoningParserNames())))
          ->capture_default_str();
      sub.add_option("--tool-call-parser", o->tool_call_parser,
                     "Reads tool calls from replies (vLLM's names):\n  auto: the model "
                     "architecture's default" +
                         chat::DescribeToolCallParsers())
          ->check(CLI::IsMember(WithAuto(chat::ToolCallParserNames())))
          ->capture_default_str();
      sub.add_flag("--enable-auto-tool-choice")
          ->description("Accepted for vLLM compatibility (always on)");
      AddKvCacheDtypeOption(sub, o->kv_cache_dtype);
      sub.add_option("--max-model-len", o->max_model_len,
                     "Longest prompt + completion; 32k = 32000, 32K = 32768 (default, or auto: "
                     "min(max_position_embeddings, what the KV cache holds))")
          ->transform(HumanReadableInt(/*auto_is_zero=*/true));
      sub.add_option("--gpu-memory-utilization,--memory-utilization", o->memory_utilization,
                     "Fraction of physical RAM for weights + KV cache")
          ->capture_default_str();
      sub.add_option("--kv-cache-memory,--kv-cache-memory-bytes", o->kv_cache_memory_bytes,
                     "KV cache size in bytes, e.g. 8G (overrides --gpu-memory-utilization)")
          ->transform(HumanReadableInt());
      sub.add_option("--max-num-seqs", o->max_num_seqs, "Sequences running at once")
          ->capture_default_str();
      sub.add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "Tokens per step")
          ->transform(HumanReadableInt())
          ->capture_default_str();
      sub.add_option("--long-prefill-token-threshold", o->long_prefill_token_threshold,
                     "Most prompt tokens one request computes per step (0: no cap below "
                     "--max-num-batched-tokens)")
          ->transform(HumanReadableInt())
          ->capture_default_str();
      sub.add_option("--max-num-prefills-while-decoding", o->max_num_prefills_while_decoding,
                     "While requests are decoding, most prompts computed per step (0: no limit); "
                     "staggers bursts of arrivals so streams keep flowing")
          ->capture_default_str();
      sub.add_option("--block-size", o->block_size, "KV cache block size in tokens")
          ->check(CLI::Range(1, 1024))
          ->capture_default_str();
      sub.add_flag("--no-enable-prefix-caching", o->no_prefix_caching, "Disable prefix caching");
      sub.add_flag("--enable-prefix-caching{false}", o->no_prefix_caching,
                   "Enable prefix caching (default)");
      sub.add_option("--seed", o->seed, "Seed for requests that bring none");
      sub.add_flag("--disable-log-requests", o->disable_log_requests,
                   "No log line per finished request");
      sub.add_flag("--enable-log-requests{false}", o->disable_log_requests,
                   "A log line per finished request (default)");
      sub.add_flag("--disable-log-stats", o->disable_log_stats,
                   "No periodic stats line (every VLLM_LOG_STATS_INTERVAL s, default 10, while "
                   "busy)");
      sub.add_option("--max-request-bytes", s.max_body_bytes,
                     "Largest request body, Content-Length or chunked (413 above)")
          ->capture_default_str();
      auto& lim = s.limits;
      sub.add_option("--max-sequences-per-request", lim.max_sequences,
                     "Most engine sequences one request creates (prompts x n); more is a 400")
          ->capture_default_str();
      sub.add_option("--max-messages-per-request", lim.max_messages,
                     "Most chat messages in one request (checked before rendering)")
          ->capture_default_str();
      sub.add_option("--max-stop-strings", lim.max_stop_strings, "Most stop strings per request")
          ->capture_default_str();
      sub.add_option("--max-stop-bytes", lim.max_stop_bytes,
                     "Most bytes of all stop strings of a request together")
          ->capture_default_str();
      sub.add_option("--max-tools", lim.max_tools, "Most tools in one chat request")
          ->capture_default_str();
      sub.add_option("--max-tools-bytes", lim.max_tools_bytes,
                     "Most JSON bytes of one chat request's tools together")
          ->capture_default_str();
      sub.add_option("--drain-timeout", s.drain_timeout_s,
                     "Seconds to let running requests finish on SIGINT/SIGTERM; then streams "
                     "end with finish_reason abort and [DONE], other requests get 503")
          ->capture_default_str();
      sub.add_option("--max-connections", s.max_connections,
                     "Connections open at once; one more is answered 503")
          ->check(CLI::PositiveNumber)
          ->capture_default_str();
      sub.add_option("--backlog", s.backlog, "Connections the kernel queues before accept")
          ->check(CLI::PositiveNumber)
          ->capture_default_str();
      sub.add_option("--max-header-bytes", s.max_header_bytes,
                     "Largest request head: request line + headers (431 above)")
          ->check(CLI::Range(size_t{256}, size_t{1} << 24))
          ->capture_default_str();
      sub.add_option("--max-header-count", s.max_header_count,
                     "Most header fields in a request (431 above)")
          ->check(CLI::PositiveNumber)
          ->capture_default_str();
      sub.add_option("--header-timeout", s.header_timeout_s,
                     "Seconds for a whole request head to arrive (the connection is closed after)")
          ->check(CLI::PositiveNumber)
          ->capture_default_str();
      sub.add_option("--body-timeout", s.body_timeout_s,
                     "Seconds for a whole request body to arrive")
          ->check(CLI::PositiveNumber)
          ->capture_default_str();
      sub.add_option("--timeout-keep-alive,--keep-alive-timeout", s.keep_alive_timeout_s,
                     "Seconds an idle connection is kept open between requests")
          ->check(CLI::PositiveNumber)
          ->capture_default_str();
      o->vllm_flags.AddTo(sub);
      // Test-only: answer every request with this file's text instead of running the model.
      sub.add_option("--scripted-output", o->scripted_output)->group("");
      sub.add_option("--scripted-tick-ms", o->scripted_tick_ms)->group("");
      return [o] { return RunServe(*o); };
    }};

}  // namespace
}  // namespace moeserve::apps
