// Subcommands of the `moeserve` binary. Each cmd_<name>.cc defines one:
//
//   static moeserve::apps::CommandRegistration reg{"tokenize", "Print the token ids of a text",
//       [](CLI::App& sub) { /* add options; return the function that runs the command */ }};
//
// The setup function adds the command's options to `sub` and returns the action to run when the
// command is chosen; the action returns the process exit code. Apps only parse arguments and call
// into the layers below (DESIGN.md).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace moeserve::apps {

using CommandAction = std::function<int()>;
using CommandSetup = std::function<CommandAction(CLI::App& sub)>;

struct Command {
  std::string name;
  std::string description;
  CommandSetup setup;
};

std::vector<Command>& Commands();

struct CommandRegistration {
  CommandRegistration(std::string name, std::string description, CommandSetup setup) {
    Commands().push_back({std::move(name), std::move(description), std::move(setup)});
  }
};

}  // namespace moeserve::apps
