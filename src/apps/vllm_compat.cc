#include "apps/vllm_compat.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/check.h"
#include "core/log.h"

namespace moeserve::apps {
namespace {

constexpr const char* kAny = "*";
constexpr const char* kModelDir = "=model";

VllmFlag Ignored(std::string name, std::string why) {
  return {std::move(name), false, false, "", std::move(why)};
}
VllmFlag IgnoredValue(std::string name, std::string harmless, std::string why) {
  return {std::move(name), false, true, std::move(harmless), std::move(why)};
}
VllmFlag Refused(std::string name, bool takes_value, std::string why) {
  return {std::move(name), true, takes_value, "", std::move(why)};
}

bool SameFolder(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (std::filesystem::equivalent(a, b, ec)) return true;
  // Appending "" gives both one trailing separator: "/m/x" and "/m/x/" name the same folder.
  return (std::filesystem::path(a) / "").lexically_normal() ==
         (std::filesystem::path(b) / "").lexically_normal();
}

bool Harmless(const VllmFlag& f, const std::string& value, const std::string& model_dir) {
  if (!f.takes_value) return true;  // a boolean flag in the table is one that is ignored
  std::stringstream choices(f.harmless_values);
  for (std::string choice; std::getline(choices, choice, '|');) {
    if (choice == kAny) return true;
    if (choice == kModelDir && SameFolder(value, model_dir)) return true;
    if (choice == value) return true;
  }
  return false;
}

}  // namespace

void NormalizeVllmArgs(std::vector<std::string>& args) {
  static const std::pair<const char*, const char*> kShortLong[] = {
      {"-tp", "--tensor-parallel-size"},
      {"-pp", "--pipeline-parallel-size"},
      {"-dp", "--data-parallel-size"},
      {"-q", "--quantization"},
  };
  for (std::string& a : args) {
    if (a.rfind("--", 0) == 0 && a.size() > 2) {
      const size_t end = std::min(a.find('='), a.size());
      for (size_t i = 2; i < end; ++i)
        if (a[i] == '_') a[i] = '-';
      continue;
    }
    for (const auto& [short_name, long_name] : kShortLong) {
      const std::string s = short_name;
      if (a == s)
        a = long_name;
      else if (a.rfind(s + "=", 0) == 0)
        a = std::string(long_name) + a.substr(s.size());
    }
  }
}

uint64_t ParseHumanReadableInt(const std::string& text) {
  std::string s = text;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  s.erase(0, s.find_first_not_of(" \t"));
  auto bad = [&]() -> uint64_t {
    Fail("\"", text, "\" is not a count: use an integer, optionally with a suffix k, m, g, t ",
         "(x1000, decimals allowed: 25.6k) or K, M, G, T (x1024: 32K)");
  };
  if (s.empty()) return bad();
  uint64_t multiplier = 1;
  bool decimal_suffix = false;
  switch (s.back()) {
    case 'k':
      multiplier = 1000ull, decimal_suffix = true;
      break;
    case 'm':
      multiplier = 1000ull * 1000, decimal_suffix = true;
      break;
    case 'g':
      multiplier = 1000ull * 1000 * 1000, decimal_suffix = true;
      break;
    case 't':
      multiplier = 1000ull * 1000 * 1000 * 1000, decimal_suffix = true;
      break;
    case 'K':
      multiplier = 1ull << 10;
      break;
    case 'M':
      multiplier = 1ull << 20;
      break;
    case 'G':
      multiplier = 1ull << 30;
      break;
    case 'T':
      multiplier = 1ull << 40;
      break;
    default:
      break;
  }
  const bool has_suffix = multiplier != 1 || decimal_suffix;
  const std::string number = has_suffix ? s.substr(0, s.size() - 1) : s;
  size_t digits = 0, dots = 0;
  for (char c : number) {
    if (c >= '0' && c <= '9')
      ++digits;
    else if (c == '.')
      ++dots;
    else
      return bad();
  }
  if (digits == 0 || dots > 1 || number.front() == '.' || number.back() == '.') return bad();
  if (dots == 1) {
    if (!decimal_suffix)
      Fail("\"", text, "\": decimals need a decimal suffix (k, m, g, t); binary suffixes (K, M, ",
           "G, T) take integers only");
    const long double v = std::stold(number) * static_cast<long double>(multiplier);
    if (v >= 1.8e19L) return bad();
    return static_cast<uint64_t>(v);  // vLLM: int(float(number) * mult), truncating
  }
  if (number.size() > 19) return bad();
  const uint64_t n = std::stoull(number);
  if (n != 0 && multiplier > UINT64_MAX / n) return bad();
  return n * multiplier;
}

CLI::Validator HumanReadableInt(bool auto_is_zero) {
  return CLI::Validator(
      [auto_is_zero](std::string& value) -> std::string {
        if (auto_is_zero && (value == "auto" || value == "-1")) {
          value = "0";
          return "";
        }
        try {
          value = std::to_string(ParseHumanReadableInt(value));
        } catch (const Error& e) {
          return e.what();
        }
        return "";
      },
      "INT[k|K|m|M|g|G]", "human-readable int");
}

const std::vector<VllmFlag>& VllmFlags() {
  static const std::vector<VllmFlag> flags = {
      // No meaning on CPUs, or moeserve always does what they ask.
      IgnoredValue("--dtype", "auto|bfloat16|bf16",
                   "moeserve computes with the checkpoint's bf16 / FP8 / MXFP4 weights and fp32 "
                   "accumulation; float16 or float32 would change results"),
      IgnoredValue("--tokenizer", kModelDir,
                   "the tokenizer is read from the model folder; another tokenizer would change "
                   "results"),
      IgnoredValue("--tokenizer-mode", "auto|hf|fast", "only Hugging Face tokenizer.json is read"),
      Ignored("--trust-remote-code", "no Python code is run"),
      Ignored("--no-trust-remote-code", "no Python code is run"),
      Ignored("--enforce-eager", "no CUDA graphs on CPUs"),
      IgnoredValue("--max-seq-len-to-capture", kAny, "no CUDA graphs on CPUs"),
      IgnoredValue("--cuda-graph-sizes", kAny, "no CUDA graphs on CPUs"),
      IgnoredValue("--compilation-config", kAny, "no torch.compile"),
      Ignored("--enable-chunked-prefill", "prompts are always computed in chunks"),
      Ignored("--no-enable-chunked-prefill", "prompts are always computed in chunks"),
      IgnoredValue("--max-num-partial-prefills", kAny, "see --max-num-prefills-while-decoding"),
      IgnoredValue("--max-long-partial-prefills", kAny, "see --max-num-prefills-while-decoding"),
      IgnoredValue("--swap-space", kAny, "preempted sequences are recomputed, never swapped"),
      IgnoredValue("--cpu-offload-gb", kAny, "the weights are in CPU memory already"),
      IgnoredValue("--preemption-mode", kAny, "preempted sequences are recomputed"),
      IgnoredValue("--num-gpu-blocks-override", kAny, "size the KV cache with --kv-cache-memory"),
      Ignored("--calculate-kv-scales", "FP8 KV keeps a scale per token and head"),
      Ignored("--disable-custom-all-reduce", "ranks all-reduce through MPI"),
      IgnoredValue("--distributed-executor-backend", kAny, "ranks are MPI processes"),
      IgnoredValue("--pipeline-parallel-size", "1",
                   "pipeline parallelism is not implemented: use -tp"),
      IgnoredValue("--data-parallel-size", "1",
                   "data parallelism is not implemented: run one server per replica"),
      IgnoredValue("--max-parallel-loading-workers", kAny, "shards are memory-mapped"),
      IgnoredValue("--load-format", "auto|safetensors", "only safetensors checkpoints are read"),
      IgnoredValue("--download-dir", kAny, "models are local folders"),
      IgnoredValue("--revision", kAny, "models are local folders"),
      IgnoredValue("--code-revision", kAny, "models are local folders"),
      IgnoredValue("--tokenizer-revision", kAny, "models are local folders"),
      IgnoredValue("--device", "auto|cpu", "moeserve runs on CPUs"),
      IgnoredValue("--guided-decoding-backend", kAny, "moeserve has one grammar engine"),
      IgnoredValue("--structured-outputs-config", kAny, "moeserve has one grammar engine"),
      IgnoredValue("--speculative-config", kAny,
                   "speculative decoding is not implemented (it would not change results)"),
      IgnoredValue("--scheduling-policy", "fcfs", "requests are scheduled first come first served"),
      Ignored("--enable-sleep-mode", "no GPU memory to release"),
      Ignored("--async-scheduling", "the engine loop is its own thread already"),
      Ignored("--disable-async-output-proc", "no async output processing"),
      Ignored("--disable-sliding-window", "the supported models use full attention"),
      IgnoredValue("--limit-mm-per-prompt", kAny, "text-only models"),
      IgnoredValue("--max-logprobs", kAny, "logprobs are limited per request"),
      IgnoredValue("--max-log-len", kAny, "prompts are not logged"),
      IgnoredValue("--uvicorn-log-level", kAny, "set MOESERVE_LOG=debug|info|warn|error"),
      Ignored("--disable-uvicorn-access-log", "no access log"),
      Ignored("--disable-fastapi-docs", "no docs pages are served"),
      Ignored("--disable-frontend-multiprocessing", "the server is one process"),
      Ignored("--enable-prompt-tokens-details", "see the usage of each response"),
      Ignored("--enable-request-id-headers", "not implemented"),
      Ignored("--enable-server-load-tracking", "not implemented"),
      Ignored("--enable-log-outputs", "outputs are not logged"),
      IgnoredValue("--otlp-traces-endpoint", kAny, "no tracing"),
      IgnoredValue("--collect-detailed-traces", kAny, "no tracing"),
      IgnoredValue("--tokenizer-pool-size", kAny, "tokenizing runs on the HTTP threads"),
      IgnoredValue("--worker-cls", kAny, "no Python workers"),
      IgnoredValue("--worker-extension-cls", kAny, "no Python workers"),
      IgnoredValue("--response-role", "assistant", "replies have the role assistant"),
      IgnoredValue("--chat-template-content-format", "auto|string",
                   "message content is passed to the template as a string"),
      IgnoredValue("--num-scheduler-steps", kAny, "one step per scheduler call"),
      Ignored("--use-v2-block-manager", "one block manager"),
      IgnoredValue("--scheduler-delay-factor", kAny, "prompts are admitted at once"),
      IgnoredValue("--prefix-caching-hash-algo", kAny, "blocks are matched by their tokens"),
      Ignored("--disable-cascade-attn", "no cascade attention"),
      Ignored("--disable-hybrid-kv-cache-manager", "one KV cache manager"),
      Ignored("--enable-eplb", "experts are placed statically"),
      Ignored("--enable-reasoning", "reasoning is parsed with --reasoning-parser"),
      IgnoredValue("--model-impl", kAny, "moeserve's own implementation is used"),
      IgnoredValue("--hf-token", kAny, "models are local folders"),
      IgnoredValue("--api-server-count", kAny, "the server is one process"),
      IgnoredValue("--data-parallel-backend", kAny, "no data parallelism"),
      IgnoredValue("--mm-processor-kwargs", kAny, "text-only models"),
      Ignored("--ray-workers-use-nsight", "no Ray"),
      IgnoredValue("--generation-config", "auto",
                   "request defaults come from the model's generation_config.json"),
      // Honouring these would change results, and moeserve does not implement them.
      Refused("--quantization", true,
              "the quantization is the checkpoint's own (config.json); quantize ahead of time "
              "with `moeserve quantize`"),
      Refused("--hf-overrides", true, "config.json is read as published"),
      Refused("--rope-scaling", true, "RoPE scaling is not implemented"),
      Refused("--rope-theta", true, "rope_theta comes from config.json"),
      Refused("--override-generation-config", true, "edit generation_config.json instead"),
      Refused("--enable-lora", false, "LoRA adapters are not implemented"),
      Refused("--lora-modules", true, "LoRA adapters are not implemented"),
      Refused("--max-loras", true, "LoRA adapters are not implemented"),
      Refused("--max-lora-rank", true, "LoRA adapters are not implemented"),
      Refused("--config", true, "YAML config files are not read: pass the flags themselves"),
      Refused("--skip-tokenizer-init", false, "the server tokenizes and detokenizes"),
      Refused("--logits-processors", true, "custom logits processors are not implemented"),
      Refused("--tool-parser-plugin", true, "parsers are built in (see --tool-call-parser)"),
      Refused("--reasoning-parser-plugin", true, "parsers are built in (see --reasoning-parser)"),
      Refused("--default-chat-template-kwargs", true, "not implemented"),
      Refused("--return-tokens-as-token-ids", false, "not implemented"),
      Refused("--kv-transfer-config", true, "disaggregated prefill is not implemented"),
      Refused("--ssl-keyfile", true, "moeserve serves plain HTTP; put a TLS proxy in front"),
      Refused("--ssl-certfile", true, "moeserve serves plain HTTP; put a TLS proxy in front"),
      Refused("--root-path", true, "not implemented"),
      Refused("--middleware", true, "no Python middleware"),
      Refused("--uds", true, "moeserve listens on TCP"),
  };
  return flags;
}

void VllmFlagSet::AddTo(CLI::App& app) {
  const auto& flags = VllmFlags();
  given_.reserve(flags.size());
  for (const VllmFlag& f : flags) {
    given_.push_back({&f, nullptr, ""});
    Given& g = given_.back();
    const bool refused = f.refused;
    const std::string help = (refused         ? std::string("Refused: ")
                              : f.takes_value ? "Ignored if " + f.harmless_values + ": "
                                              : std::string("Ignored: ")) +
                             f.why;
    g.option = f.takes_value ? app.add_option(f.name, g.value, help) : app.add_flag(f.name, help);
    g.option->group(refused ? "vLLM flags refused" : "vLLM flags ignored");
  }
}

std::string VllmFlagSet::Check(const std::string& model_dir) const {
  std::string ignored;
  for (const Given& g : given_) {
    if (g.option->count() == 0) continue;
    const VllmFlag& f = *g.flag;
    if (f.refused || !Harmless(f, g.value, model_dir))
      Fail(f.name, f.takes_value ? " " + g.value : "", " is not supported: ", f.why);
    if (!ignored.empty()) ignored += ", ";
    ignored += f.name + (f.takes_value ? " " + g.value : "");
  }
  if (ignored.empty()) return "";
  const std::string line = "ignoring vLLM flags that change nothing in moeserve: " + ignored;
  LogWarn(line);
  return line;
}

std::string ResolveChatTemplate(const std::string& value) {
  std::ifstream f(value, std::ios::binary);
  if (f) {
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  if (value.find_first_of("{}\n") == std::string::npos)
    Fail("--chat-template ", value,
         " looks like a file path, but it cannot be opened (an inline template contains { } or a "
         "newline)");
  return value;
}

}  // namespace moeserve::apps
