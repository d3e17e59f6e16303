// Progress of loading a checkpoint's weights, as vLLM's "Loading safetensors checkpoint shards"
// bar: counted in bytes of the tensors the model takes (a tensor ignored by rule is not counted),
// with the shards whose tensors are all taken. On a terminal, one bar redrawn in place; otherwise
// (a log file, a pipe) an info line at every 10%, so logs stay readable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace moeserve::loader {

class LoadProgress {
 public:
  // `bytes_per_file`: bytes to load from each shard. `terminal`: draw a bar on stderr.
  LoadProgress(std::map<std::string, size_t> bytes_per_file, bool terminal);
  // `bytes` of `file` were loaded.
  void Add(const std::string& file, size_t bytes);
  // Completes the bar (100%) whatever was counted.
  void Finish();
  // "loading weights:  40% (2.1 / 5.2 GiB, 1/3 shards)"
  std::string Line() const;

 private:
  void Report();
  std::map<std::string, size_t> remaining_;  // per shard
  size_t total_ = 0, done_ = 0, shards_ = 0, shards_done_ = 0;
  int last_reported_ = -1;  // percent (terminal) or tenth (log lines)
  bool terminal_;
  bool finished_ = false;
};

}  // namespace moeserve::loader
