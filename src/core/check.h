// Two kinds of failure (DESIGN.md "Errors"):
//  - moeserve::Error: bad input at a boundary (a file, a flag, a request). Thrown, caught by the
//  app
//    or the server, reported to the user; the process keeps serving where it can.
//  - MOESERVE_CHECK: a broken internal invariant. Prints the offending values and aborts.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace moeserve {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
[[noreturn]] void CheckFailed(const char* file, int line, const char* expr, const std::string& msg);

template <typename... Args>
std::string Concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

// Builds a message from any streamable values: Fail("tensor ", name, " has shape ", ...).
template <typename... Args>
[[noreturn]] void Fail(const Args&... args) {
  throw Error(detail::Concat(args...));
}

}  // namespace moeserve

#define MOESERVE_CHECK(cond, ...)                                                                 \
  do {                                                                                            \
    if (!(cond)) [[unlikely]]                                                                     \
      ::moeserve::detail::CheckFailed(__FILE__, __LINE__, #cond,                                  \
                                      ::moeserve::detail::Concat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
