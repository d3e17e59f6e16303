// Helpers shared by the client tests: temp files and running tests/client/reference.py.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>

namespace moeserve::client::testing {

// A fresh directory under the system temp dir, removed with the object.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "moeserve_client_XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs reference.py `mode` on `input` with the system Python; nullopt when there is no Python.
inline std::optional<nlohmann::json> PythonReference(const std::string& mode,
                                                     const nlohmann::json& input) {
  const std::string python = MOESERVE_PYTHON;
  if (python.empty() || !std::filesystem::exists(python)) return std::nullopt;
  TempDir dir;
  WriteFile(dir.File("in.json"), input.dump());
  const std::string cmd = python + " " + MOESERVE_CLIENT_REFERENCE + " " + mode + " " +
                          dir.File("in.json") + " " + dir.File("out.json");
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << "reference.py failed: " << cmd;
    return std::nullopt;
  }
  return nlohmann::json::parse(ReadFile(dir.File("out.json")));
}

}  // namespace moeserve::client::testing
