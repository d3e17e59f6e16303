#include "loader/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/log.h"

namespace moeserve::loader {
namespace fs = std::filesystem;

Checkpoint::Checkpoint(const std::string& dir) : dir_(dir) {
  if (!fs::is_directory(dir)) Fail("model folder ", dir, " does not exist or is not a folder");
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single_path = fs::path(dir) / "model.safetensors";
  if (fs::exists(index_path)) {
    nlohmann::json index;
    try {
      std::ifstream in(index_path);
      index = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      Fail(index_path.string(), ": invalid JSON: ", e.what());
    }
    if (!index.contains("weight_map") || !index["weight_map"].is_object())
      Fail(index_path.string(), ": no \"weight_map\" object");
    std::map<std::string, SafetensorsFile*> by_file;
    for (auto& [name, file] : index["weight_map"].items()) {
      if (!file.is_string()) Fail(index_path.string(), ": weight_map entry ", name, " is not a string");
      const std::string f = file.get<std::string>();
      if (!by_file.count(f)) {
        const fs::path p = fs::path(dir) / f;
        if (!fs::exists(p))
          Fail(index_path.string(), ": tensor ", name, " is mapped to ", f, " which does not exist");
        files_.push_back(std::make_unique<SafetensorsFile>(p.string()));
        by_file[f] = files_.back().get();
      }
      const auto& tensors = by_file[f]->tensors();
      auto it = tensors.find(name);
      if (it == tensors.end())
        Fail(index_path.string(), ": tensor ", name, " is mapped to ", f, " but that file lacks it");
      index_[name] = &it->second;
    }
    for (auto& file : files_)
      for (auto& [name, info] : file->tensors())
        if (!index_.count(name))
          Fail(file->path(), ": tensor ", name, " is not listed in model.safetensors.index.json");
  } else if (fs::exists(single_path)) {
    files_.push_back(std::make_unique<SafetensorsFile>(single_path.string()));
    for (auto& [name, info] : files_.back()->tensors()) index_[name] = &info;
  } else {
    Fail("model folder ", dir, " has neither model.safetensors nor model.safetensors.index.json");
  }
}

const TensorInfo* Checkpoint::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

size_t Checkpoint::TotalBytes() const {
  size_t n = 0;
  for (auto& [name, t] : index_) n += t->num_bytes;
  return n;
}

const TensorInfo& StrictLoader::Take(const std::string& name, const std::vector<int64_t>& shape,
                                     std::initializer_list<DType> dtypes) {
  std::string expected_dtypes;
  for (DType d : dtypes) {
    if (!expected_dtypes.empty()) expected_dtypes += '|';
    expected_dtypes += DTypeName(d);
  }
  const TensorInfo* t = ckpt_.Find(name);
  if (!t)
    Fail("checkpoint ", ckpt_.dir(), ": missing tensor ", name, " (expected shape ",
         ShapeString(shape), " ", expected_dtypes, ")");
  if (t->shape != shape)
    Fail(t->file, ": tensor ", name, ": expected shape ", ShapeString(shape), ", found ",
         ShapeString(t->shape));
  bool dtype_ok = false;
  for (DType d : dtypes) dtype_ok |= (t->dtype == d);
  if (!dtype_ok)
    Fail(t->file, ": tensor ", name, ": expected dtype ", expected_dtypes, ", found ",
         DTypeName(t->dtype));
  if (show_progress_ && !progress_) {
    std::map<std::string, size_t> bytes_per_file;
    for (auto& [n, info] : ckpt_.tensors())
      if (!IsIgnored(n)) bytes_per_file[info->file] += info->num_bytes;
    progress_ = std::make_unique<LoadProgress>(std::move(bytes_per_file), progress_terminal_);
  }
  if (taken_.insert(name).second && progress_) progress_->Add(t->file, t->num_bytes);
  return *t;
}

void StrictLoader::ShowProgress(bool terminal) {
  show_progress_ = true;
  progress_terminal_ = terminal;
}

bool StrictLoader::IsIgnored(const std::string& name) const {
  for (auto& [why, rule] : ignore_rules_)
    if (rule(name)) return true;
  return false;
}

void StrictLoader::Ignore(std::string why, std::function<bool(const std::string&)> rule) {
  ignore_rules_.emplace_back(std::move(why), std::move(rule));
}

size_t StrictLoader::Finish() const {
  if (progress_) progress_->Finish();
  std::vector<std::string> unexpected;
  std::map<std::string, size_t> ignored;
  for (auto& [name, info] : ckpt_.tensors()) {
    if (taken_.count(name)) continue;
    bool matched = false;
    for (auto& [why, rule] : ignore_rules_) {
      if (rule(name)) {
        ignored[why]++;
        matched = true;
        break;
      }
    }
    if (!matched) unexpected.push_back(name);
  }
  if (!unexpected.empty()) {
    std::string list;
    for (size_t i = 0; i < unexpected.size() && i < 10; ++i)
      list += "\n  " + unexpected[i] + " in " + ckpt_.Find(unexpected[i])->file;
    Fail("checkpoint ", ckpt_.dir(), ": ", unexpected.size(),
         " unexpected tensor(s) that the model neither uses nor ignores by rule:", list);
  }
  size_t total = 0;
  for (auto& [why, n] : ignored) {
    LogInfo("ignored ", n, " checkpoint tensors: ", why);
    total += n;
  }
  return total;
}

}  // namespace moeserve::loader
