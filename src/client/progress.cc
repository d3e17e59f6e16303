#include "client/progress.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

namespace moeserve::client {
namespace {

std::string FormatDuration(double s) {
  if (!(s >= 0) || s > 359999) return "--:--";
  const long total = static_cast<long>(s + 0.5);
  char buf[32];
  if (total >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", total / 3600, total / 60 % 60, total % 60);
  else
    std::snprintf(buf, sizeof buf, "%02ld:%02ld", total / 60, total % 60);
  return buf;
}

}  // namespace

ProgressBar::ProgressBar(std::string label, size_t total, bool enabled)
    : label_(std::move(label)),
      total_(total),
      enabled_(enabled),
      tty_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {
  if (enabled_ && tty_) Draw(true);
}

void ProgressBar::Advance(size_t n) {
  std::lock_guard lock(mu_);
  done_ += n;
  Draw(false);
}

void ProgressBar::Finish() {
  std::lock_guard lock(mu_);
  if (finished_) return;
  finished_ = true;
  Draw(true);
  if (enabled_ && tty_) std::fputc('\n', stderr);
}

void ProgressBar::Draw(bool force) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (tty_) {
    if (!force && done_ < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  } else {
    const size_t decile = total_ ? done_ * 10 / total_ : 10;
    if (decile == last_decile_ && (!force || done_ == last_printed_done_)) return;
    last_decile_ = decile;
    last_printed_done_ = done_;
  }
  last_draw_ = now;
  const double elapsed_s = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed_s > 0 ? done_ / elapsed_s : 0;
  const double eta_s = rate > 0 ? (total_ - std::min(done_, total_)) / rate : -1;
  constexpr int kWidth = 30;
  const int filled = total_ ? static_cast<int>(kWidth * std::min(done_, total_) / total_) : kWidth;
  std::string bar(filled, '#');
  bar.resize(kWidth, ' ');
  const int percent = total_ ? static_cast<int>(100 * std::min(done_, total_) / total_) : 100;
  std::fprintf(stderr, "%s%s: %3d%%|%s| %zu/%zu [%s<%s, %.2f it/s]%s", tty_ ? "\r" : "",
               label_.c_str(), percent, bar.c_str(), done_, total_,
               FormatDuration(elapsed_s).c_str(), FormatDuration(eta_s).c_str(), rate,
               tty_ ? "" : "\n");
  std::fflush(stderr);
}

void ParallelFor(size_t n, size_t workers, const std::function<void(size_t, size_t)>& fn) {
  workers = std::max<size_t>(1, std::min(workers, n));
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  threads.reserve(workers);
  for (size_t w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      for (size_t i; (i = next.fetch_add(1)) < n;) fn(w, i);
    });
  for (auto& t : threads) t.join();
}

}  // namespace moeserve::client
