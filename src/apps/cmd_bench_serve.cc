// moeserve bench-serve: load-test an OpenAI-compatible server like `vllm bench serve` (random
// token-id prompts, streamed responses; TTFT, TPOT, ITL). The same command is `bench serve`.
#include <memory>

#include "apps/command_registry.h"
#include "client/bench_serve.h"

namespace moeserve::apps {
namespace {

CommandRegistration reg{
    "bench-serve",
    "Load-test an OpenAI-compatible server (like vllm bench serve): throughput, TTFT, TPOT, ITL",
    [](CLI::App& sub) -> CommandAction {
      auto o = std::make_shared<client::ServeBenchOptions>();
      client::AddServeBenchOptions(sub, *o);
      return [o] { return client::RunServeBenchmark(*o); };
    }};

}  // namespace
}  // namespace moeserve::apps
