// A Hugging Face checkpoint folder: config.json plus model.safetensors, or shards listed in
// model.safetensors.index.json. Tensors are taken by name through a StrictLoader, which enforces
// DESIGN.md's rule: every expected parameter present with the exact shape and dtype, and every
// tensor in the checkpoint either taken or ignored by an explicit, named rule.
#pragma once

#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "loader/load_progress.h"
#include "loader/safetensors.h"

namespace moeserve::loader {

class Checkpoint {
 public:
  // Throws moeserve::Error if the folder has no weights, the index is malformed, the index names a
  // missing file, or a tensor the index lists is absent from its file (or present in another).
  explicit Checkpoint(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const TensorInfo* Find(const std::string& name) const;
  const std::map<std::string, const TensorInfo*>& tensors() const { return index_; }
  size_t TotalBytes() const;

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*> index_;
};

class StrictLoader {
 public:
  explicit StrictLoader(const Checkpoint& ckpt) : ckpt_(ckpt) {}

  // The tensor `name` with exactly `shape` and one of `dtypes`; otherwise throws naming the file,
  // the tensor, what was expected and what was found.
  const TensorInfo& Take(const std::string& name, const std::vector<int64_t>& shape,
                         std::initializer_list<DType> dtypes);
  bool Has(const std::string& name) const { return ckpt_.Find(name) != nullptr; }

  // Tensors whose name satisfies `rule` are accepted and not loaded; `why` is reported in logs.
  void Ignore(std::string why, std::function<bool(const std::string&)> rule);

  // Reports loading progress (load_progress.h) as tensors are taken, from the first Take on
  // (the ignore rules must be declared by then). `terminal`: a bar on stderr, else log lines.
  void ShowProgress(bool terminal);

  // Throws if a checkpoint tensor was neither taken nor ignored (lists up to 10 of them).
  // Returns how many tensors were ignored.
  size_t Finish() const;

 private:
  bool IsIgnored(const std::string& name) const;
  bool show_progress_ = false, progress_terminal_ = false;
  mutable std::unique_ptr<LoadProgress> progress_;
  const Checkpoint& ckpt_;
  std::set<std::string> taken_;
  std::vector<std::pair<std::string, std::function<bool(const std::string&)>>> ignore_rules_;
};

}  // namespace moeserve::loader
