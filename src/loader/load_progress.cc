#include "loader/load_progress.h"

#include <cstdio>

#include "core/log.h"

namespace moeserve::loader {

LoadProgress::LoadProgress(std::map<std::string, size_t> bytes_per_file, bool terminal)
    : remaining_(std::move(bytes_per_file)), terminal_(terminal) {
  for (auto& [file, bytes] : remaining_) total_ += bytes;
  shards_ = remaining_.size();
}

void LoadProgress::Add(const std::string& file, size_t bytes) {
  auto it = remaining_.find(file);
  if (it == remaining_.end()) return;
  const size_t counted = std::min(bytes, it->second);
  it->second -= counted;
  done_ += counted;
  if (it->second == 0) {
    ++shards_done_;
    remaining_.erase(it);
  }
  Report();
}

void LoadProgress::Finish() {
  if (finished_) return;
  done_ = total_;
  shards_done_ = shards_;
  Report();
  if (terminal_) std::fputc('\n', stderr);
  finished_ = true;
}

std::string LoadProgress::Line() const {
  const int percent = total_ ? static_cast<int>(100.0 * double(done_) / double(total_)) : 100;
  char line[160];
  std::snprintf(line, sizeof line, "loading weights: %3d%% (%.1f / %.1f GiB, %zu/%zu shards)",
                percent, double(done_) / double(1u << 30), double(total_) / double(1u << 30),
                shards_done_, shards_);
  return line;
}

void LoadProgress::Report() {
  const int percent = total_ ? static_cast<int>(100.0 * double(done_) / double(total_)) : 100;
  if (terminal_) {
    if (percent == last_reported_) return;
    last_reported_ = percent;
    constexpr int kWidth = 30;
    const int filled = percent * kWidth / 100;
    std::fprintf(stderr, "\r%s |%s%s|", Line().c_str(), std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, ' ').c_str());
    std::fflush(stderr);
    return;
  }
  const int tenth = percent / 10;
  if (tenth == last_reported_) return;
  last_reported_ = tenth;
  LogInfo(Line());
}

}  // namespace moeserve::loader
