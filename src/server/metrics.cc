#include "server/metrics.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/log.h"

namespace moeserve::server {
namespace {

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void Header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::Render(const std::string& name, const std::string& labels, std::string& out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? Num(bounds_[i]) : "+Inf";
    out += name + "_bucket{" + labels + ",le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_sum{" + labels + "} " + Num(sum_) + "\n";
  out += name + "_count{" + labels + "} " + std::to_string(count_) + "\n";
}

// Buckets as vLLM's: CPU decode is slower than GPU, so the upper ends matter here.
Metrics::Metrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
             1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}),
      tpot_({0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
             10.0, 20.0, 40.0, 80.0}),
      e2e_({0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
            30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}),
      output_tokens_({1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000}),
      prompt_tokens_({1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000,
                      100000, 200000}) {}

void Metrics::RecordRequest(const FinishedRequest& r) {
  if (log_requests_.load()) LogInfo(FormatFinishedRequest(r));
  std::lock_guard lock(mu_);
  ++success_by_reason_[r.finish_reason];
  if (r.ttft_s >= 0) ttft_.Observe(r.ttft_s);
  if (r.output_tokens > 1 && r.ttft_s >= 0)
    tpot_.Observe((r.e2e_s - r.ttft_s) / static_cast<double>(r.output_tokens - 1));
  e2e_.Observe(r.e2e_s);
  output_tokens_.Observe(static_cast<double>(r.output_tokens));
  if (r.prompt_tokens > 0) prompt_tokens_.Observe(static_cast<double>(r.prompt_tokens));
}

std::string Metrics::Render(const engine::EngineStats& s, const std::string& model_name) const {
  const std::string labels = "model_name=\"" + model_name + "\"";
  // vLLM v1 labels its metrics with the engine index too.
  const std::string vllm_labels = labels + ",engine=\"0\"";
  std::string out;
  // `vllm_name` (without the prefix): the same quantity under vLLM's name, "" when vLLM has none.
  auto sample = [&](const std::string& name, const char* type, const char* help, double v,
                    const std::string& vllm_name) {
    Header(out, "moeserve:" + name, type, help);
    out += "moeserve:" + name + "{" + labels + "} " + Num(v) + "\n";
    if (vllm_name.empty()) return;
    Header(out, "vllm:" + vllm_name, type, help);
    out += "vllm:" + vllm_name + "{" + vllm_labels + "} " + Num(v) + "\n";
  };
  const double kv_usage =
      s.kv_blocks_total ? double(s.kv_blocks_used) / double(s.kv_blocks_total) : 0.0;
  // The engine counts prompt tokens it computed; a prompt's cached tokens were looked up too, so
  // computed + hits is what vLLM counts as prompt tokens and as prefix-cache queries.
  const double prompt_seen = double(s.prompt_tokens) + double(s.prefix_cache_hit_tokens);
  sample("num_requests_running", "gauge", "Requests running in the engine.", double(s.num_running),
         "num_requests_running");
  sample("num_requests_waiting", "gauge", "Requests waiting to run.", double(s.num_waiting),
         "num_requests_waiting");
  sample("kv_cache_usage_perc", "gauge", "Fraction of KV cache blocks in use (1 = full).", kv_usage,
         "kv_cache_usage_perc");
  sample("kv_cache_blocks_used", "gauge", "KV cache blocks in use.", double(s.kv_blocks_used), "");
  sample("kv_cache_blocks_total", "gauge", "KV cache blocks in the pool.",
         double(s.kv_blocks_total), "");
  sample("prompt_tokens_total", "counter", "Prompt tokens computed (prefill).",
         double(s.prompt_tokens), "");
  Header(out, "vllm:prompt_tokens_total", "counter",
         "Prompt tokens processed (computed or found in the prefix cache).");
  out += "vllm:prompt_tokens_total{" + vllm_labels + "} " + Num(prompt_seen) + "\n";
  sample("generation_tokens_total", "counter", "Tokens generated.", double(s.generation_tokens),
         "generation_tokens_total");
  sample("prefix_cache_hits_total", "counter", "Prompt tokens served from the prefix cache.",
         double(s.prefix_cache_hit_tokens), "prefix_cache_hits_total");
  Header(out, "vllm:prefix_cache_queries_total", "counter",
         "Prefix cache queries, in prompt tokens looked up.");
  out += "vllm:prefix_cache_queries_total{" + vllm_labels + "} " + Num(prompt_seen) + "\n";
  sample("num_preemptions_total", "counter", "Sequences preempted for lack of KV blocks.",
         double(s.num_preemptions), "num_preemptions_total");

  std::lock_guard lock(mu_);
  for (const char* prefix : {"moeserve:", "vllm:"}) {
    const std::string& l = std::string(prefix) == "vllm:" ? vllm_labels : labels;
    const std::string name = std::string(prefix) + "request_success_total";
    Header(out, name, "counter", "Finished requests by finish reason.");
    for (const char* reason : {"stop", "length", "abort"}) {
      auto it = success_by_reason_.find(reason);
      out += name + "{" + l + ",finished_reason=\"" + reason + "\"} " +
             std::to_string(it == success_by_reason_.end() ? 0 : it->second) + "\n";
    }
  }
  // moeserve's name, vLLM's name, help, histogram.
  const struct {
    const char* name;
    const char* vllm_name;
    const char* help;
    const Histogram& h;
  } histograms[] = {
      {"time_to_first_token_seconds", "time_to_first_token_seconds",
       "Time from request arrival to its first token.", ttft_},
      {"time_per_output_token_seconds", "request_time_per_output_token_seconds",
       "Mean time between output tokens of a request.", tpot_},
      {"e2e_request_latency_seconds", "e2e_request_latency_seconds",
       "Time from request arrival to its last token.", e2e_},
      {"request_generation_tokens", "request_generation_tokens", "Output tokens per request.",
       output_tokens_},
      {"request_prompt_tokens", "request_prompt_tokens", "Prompt tokens per request.",
       prompt_tokens_},
  };
  for (const auto& h : histograms) {
    Header(out, std::string("moeserve:") + h.name, "histogram", h.help);
    h.h.Render(std::string("moeserve:") + h.name, labels, out);
    Header(out, std::string("vllm:") + h.vllm_name, "histogram", h.help);
    h.h.Render(std::string("vllm:") + h.vllm_name, vllm_labels, out);
  }
  return out;
}

std::string FormatFinishedRequest(const FinishedRequest& r) {
  char times[96];
  if (r.ttft_s >= 0)
    std::snprintf(times, sizeof times, "TTFT %.3f s, e2e %.3f s", r.ttft_s, r.e2e_s);
  else
    std::snprintf(times, sizeof times, "TTFT -, e2e %.3f s", r.e2e_s);
  return "request " + std::to_string(r.id) + " finished (" + r.finish_reason + "): prompt " +
         std::to_string(r.prompt_tokens) + " tokens (" + std::to_string(r.cached_tokens) +
         " cached), output " + std::to_string(r.output_tokens) + " tokens, " + times;
}

std::optional<std::string> StatsLogger::Tick(const engine::EngineStats& now, double now_s) {
  if (!last_) {
    last_ = now;
    last_s_ = now_s;
    return std::nullopt;
  }
  const engine::EngineStats& was = *last_;
  const double dt = std::max(now_s - last_s_, 1e-9);
  const uint64_t prompt = now.prompt_tokens - was.prompt_tokens;
  const uint64_t generated = now.generation_tokens - was.generation_tokens;
  const uint64_t hits = now.prefix_cache_hit_tokens - was.prefix_cache_hit_tokens;
  const bool idle = prompt == 0 && generated == 0 && now.num_running == 0 && now.num_waiting == 0;
  last_ = now;
  last_s_ = now_s;
  if (idle) return std::nullopt;
  const double kv =
      now.kv_blocks_total ? 100.0 * double(now.kv_blocks_used) / double(now.kv_blocks_total) : 0.0;
  const double hit_rate = prompt + hits ? 100.0 * double(hits) / double(prompt + hits) : 0.0;
  char line[320];
  std::snprintf(line, sizeof line,
                "Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f "
                "tokens/s, Running: %zu reqs, Waiting: %zu reqs, KV cache usage: %.1f%%, "
                "Prefix cache hit rate: %.1f%%",
                double(prompt) / dt, double(generated) / dt, now.num_running, now.num_waiting, kv,
                hit_rate);
  return std::string(line);
}

PeriodicStatsLog::PeriodicStatsLog(const engine::EngineInterface& engine, double interval_s) {
  thread_ = std::thread([this, &engine, interval_s] {
    const auto t0 = std::chrono::steady_clock::now();
    StatsLogger stats;
    std::unique_lock lock(mu_);
    while (true) {
      const double now =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (auto line = stats.Tick(engine.Stats(), now)) LogInfo(*line);
      if (cv_.wait_for(lock, std::chrono::duration<double>(interval_s), [this] { return stop_; }))
        return;
    }
  });
}

PeriodicStatsLog::~PeriodicStatsLog() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

}  // namespace moeserve::server
