// Typed access to a JSON config (config.json, generation_config.json) with errors that name the
// file and the key.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/check.h"

namespace moeserve::loader {

class JsonConfig {
 public:
  // Throws if the file is missing or is not a JSON object.
  static JsonConfig FromFile(const std::string& path);
  JsonConfig(nlohmann::json j, std::string source) : j_(std::move(j)), source_(std::move(source)) {}

  bool Has(const std::string& key) const { return j_.contains(key) && !j_[key].is_null(); }
  const nlohmann::json& json() const { return j_; }
  const std::string& source() const { return source_; }

  template <typename T>
  T Get(const std::string& key) const {
    if (!Has(key)) Fail(source_, ": missing required key \"", key, "\"");
    return Convert<T>(key);
  }
  template <typename T>
  T GetOr(const std::string& key, T fallback) const {
    return Has(key) ? Convert<T>(key) : fallback;
  }
  template <typename T>
  std::optional<T> GetOptional(const std::string& key) const {
    if (!Has(key)) return std::nullopt;
    return Convert<T>(key);
  }

 private:
  template <typename T>
  T Convert(const std::string& key) const {
    try {
      return j_.at(key).get<T>();
    } catch (const nlohmann::json::exception&) {
      Fail(source_, ": key \"", key, "\" has the wrong type: ", j_.at(key).dump());
    }
  }

  nlohmann::json j_;
  std::string source_;
};

}  // namespace moeserve::loader
