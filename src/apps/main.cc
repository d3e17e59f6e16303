// moeserve: a serving engine for mixture-of-experts LLMs on CPUs.
#include <algorithm>
#include <cstdio>
#include <exception>

#include "apps/command_registry.h"
#include "apps/model_session.h"
#include "apps/vllm_compat.h"
#include "core/check.h"

int main(int argc, char** argv) {
  using namespace moeserve::apps;
  SetProcessArgs(argc, argv);
  CLI::App app{"moeserve: serve and run mixture-of-experts LLMs (MiniMax-M2, Qwen3-MoE) on CPUs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "moeserve 0.1.0");
  auto& commands = Commands();
  std::sort(commands.begin(), commands.end(),
            [](const Command& a, const Command& b) { return a.name < b.name; });
  std::vector<std::pair<CLI::App*, CommandAction>> actions;
  for (const Command& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    actions.emplace_back(sub, c.setup(*sub));
  }
  // vLLM's spellings: --max_model_len for --max-model-len, -tp for --tensor-parallel-size.
  std::vector<std::string> args(argv + 1, argv + argc);
  NormalizeVllmArgs(args);
  std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& [sub, action] : actions)
      if (sub->parsed()) return action();
  } catch (const moeserve::Error& e) {
    std::fprintf(stderr, "moeserve: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moeserve: unexpected error: %s\n", e.what());
    return 1;
  }
  return 0;
}
