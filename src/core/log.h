// A small leveled logger to stderr. Level from MOESERVE_LOG (debug|info|warn|error), default info.
#pragma once

#include <string>

#include "core/check.h"

namespace moeserve {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

void LogMessage(LogLevel level, const std::string& msg);
bool LogEnabled(LogLevel level);

template <typename... Args>
void LogInfo(const Args&... args) {
  if (LogEnabled(LogLevel::kInfo)) LogMessage(LogLevel::kInfo, detail::Concat(args...));
}
template <typename... Args>
void LogWarn(const Args&... args) {
  if (LogEnabled(LogLevel::kWarn)) LogMessage(LogLevel::kWarn, detail::Concat(args...));
}
template <typename... Args>
void LogDebug(const Args&... args) {
  if (LogEnabled(LogLevel::kDebug)) LogMessage(LogLevel::kDebug, detail::Concat(args...));
}
template <typename... Args>
void LogError(const Args&... args) {
  LogMessage(LogLevel::kError, detail::Concat(args...));
}

}  // namespace moeserve
