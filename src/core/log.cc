#include "core/log.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace moeserve {
namespace {

LogLevel ThresholdFromEnv() {
  const char* v = std::getenv("MOESERVE_LOG");
  if (!v) return LogLevel::kInfo;
  if (!std::strcmp(v, "debug")) return LogLevel::kDebug;
  if (!std::strcmp(v, "warn")) return LogLevel::kWarn;
  if (!std::strcmp(v, "error")) return LogLevel::kError;
  return LogLevel::kInfo;
}

}  // namespace

bool LogEnabled(LogLevel level) {
  static const LogLevel threshold = ThresholdFromEnv();
  return level >= threshold;
}

void LogMessage(LogLevel level, const std::string& msg) {
  static std::mutex mu;
  static const char* kNames[] = {"DEBUG", "INFO", "WARN", "ERROR"};
  std::lock_guard lock(mu);
  std::fprintf(stderr, "[moeserve %s] %s\n", kNames[static_cast<int>(level)], msg.c_str());
}

namespace detail {
void CheckFailed(const char* file, int line, const char* expr, const std::string& msg) {
  std::fprintf(stderr, "moeserve: internal check failed at %s:%d: %s %s\n", file, line, expr,
               msg.c_str());
  std::abort();
}
}  // namespace detail

}  // namespace moeserve
