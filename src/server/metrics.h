// Prometheus metrics with vLLM's names under a `moeserve:` prefix. Request-level counters and
// latency histograms are recorded here by the routes; engine gauges (running, waiting, KV blocks)
// and token counters come from EngineInterface::Stats() at scrape time.
//
// Thread-safe: Record* and Render may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
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

class Metrics {
 public:
  Metrics();
  // One finished choice (engine request). `ttft_s` < 0 when it produced no token.
  void RecordRequest(const std::string& finish_reason, double ttft_s, double e2e_s,
                     size_t num_output_tokens);
  // Prometheus text exposition for /metrics.
  std::string Render(const engine::EngineStats& stats, const std::string& model_name) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> success_by_reason_;
  Histogram ttft_, tpot_, e2e_, output_tokens_;
};

}  // namespace moeserve::server
