#include "apps/command_registry.h"

namespace moeserve::apps {

std::vector<Command>& Commands() {
  static std::vector<Command> commands;
  return commands;
}

}  // namespace moeserve::apps
