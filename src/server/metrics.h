// Prometheus metrics under a `moeserve:` prefix, and also under vLLM's `vllm:` names for the ones
// that mean the same (so vLLM's Grafana dashboards read a moeserve server). Request-level counters
// and latency histograms are recorded here when a request finishes, which also writes the request
// log line; engine gauges (running, waiting, KV blocks) and token counters come from
// EngineInterface::Stats() at scrape time. StatsLogger writes vLLM's periodic stats line.
//
// Thread-safe: RecordRequest and Render may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine_interface.h"

namespace moeserve::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);
  // Appends the exposition lines of `name` (buckets, _sum, _count).
  void Render(const std::string& name, const std::string& labels, std::string& out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// One finished choice (engine request).
struct FinishedRequest {
  uint64_t id = 0;            // the engine request id
  std::string finish_reason;  // stop, length, abort
  double ttft_s = -1;         // arrival to first token; < 0 when it produced none
  double e2e_s = 0;           // arrival to last token
  size_t prompt_tokens = 0, output_tokens = 0, cached_tokens = 0;
};

class Metrics {
 public:
  Metrics();
  // Records a finished request and, unless turned off, logs one line for it.
  void RecordRequest(const FinishedRequest& request);
  void RecordRequest(const std::string& finish_reason, double ttft_s, double e2e_s,
                     size_t num_output_tokens) {
    RecordRequest({0, finish_reason, ttft_s, e2e_s, 0, num_output_tokens, 0});
  }
  // The per-request log line (--disable-log-requests turns it off).
  void set_log_requests(bool on) { log_requests_ = on; }
  // Prometheus text exposition for /metrics.
  std::string Render(const engine::EngineStats& stats, const std::string& model_name) const;

 private:
  std::atomic<bool> log_requests_{true};
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> success_by_reason_;
  Histogram ttft_, tpot_, e2e_, output_tokens_, prompt_tokens_;
};

// "request 7 finished (stop): prompt 12 tokens (0 cached), output 30 tokens, TTFT 0.120 s, e2e
// 1.532 s"
std::string FormatFinishedRequest(const FinishedRequest& r);

// vLLM's periodic stats line, from two snapshots of the engine's counters: prompt and generation
// throughput over the interval, running / waiting requests, KV cache usage and the prefix-cache
// hit rate over the interval. Not thread-safe: one caller (a logging thread).
class StatsLogger {
 public:
  // The line for the interval since the previous call, or nullopt when the engine was idle
  // throughout (nothing ran, nothing waited, no token was computed), as vLLM stays quiet then.
  std::optional<std::string> Tick(const engine::EngineStats& now, double now_s);

 private:
  std::optional<engine::EngineStats> last_;
  double last_s_ = 0;
};

// Logs StatsLogger's line every `interval_s` from a thread of its own, until destroyed. The
// engine must outlive it.
class PeriodicStatsLog {
 public:
  PeriodicStatsLog(const engine::EngineInterface& engine, double interval_s);
  ~PeriodicStatsLog();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace moeserve::server
