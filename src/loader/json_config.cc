#include "loader/json_config.h"

#include <filesystem>
#include <fstream>

namespace moeserve::loader {

JsonConfig JsonConfig::FromFile(const std::string& path) {
  if (!std::filesystem::exists(path)) Fail(path, ": file not found");
  std::ifstream in(path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    Fail(path, ": invalid JSON: ", e.what());
  }
  if (!j.is_object()) Fail(path, ": expected a JSON object");
  return JsonConfig(std::move(j), path);
}

}  // namespace moeserve::loader
