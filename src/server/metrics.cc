#include "server/metrics.h"

#include <cstdio>

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
      output_tokens_({1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000}) {}

void Metrics::RecordRequest(const std::string& finish_reason, double ttft_s, double e2e_s,
                            size_t num_output_tokens) {
  std::lock_guard lock(mu_);
  ++success_by_reason_[finish_reason];
  if (ttft_s >= 0) ttft_.Observe(ttft_s);
  if (num_output_tokens > 1 && ttft_s >= 0)
    tpot_.Observe((e2e_s - ttft_s) / static_cast<double>(num_output_tokens - 1));
  e2e_.Observe(e2e_s);
  output_tokens_.Observe(static_cast<double>(num_output_tokens));
}

std::string Metrics::Render(const engine::EngineStats& s, const std::string& model_name) const {
  const std::string labels = "model_name=\"" + model_name + "\"";
  std::string out;
  auto gauge = [&](const std::string& name, const char* help, double v, const char* type) {
    Header(out, "moeserve:" + name, type, help);
    out += "moeserve:" + name + "{" + labels + "} " + Num(v) + "\n";
  };
  gauge("num_requests_running", "Requests running in the engine.", double(s.num_running), "gauge");
  gauge("num_requests_waiting", "Requests waiting to run.", double(s.num_waiting), "gauge");
  gauge("kv_cache_usage_perc", "Fraction of KV cache blocks in use (1 = full).",
        s.kv_blocks_total ? double(s.kv_blocks_used) / double(s.kv_blocks_total) : 0.0, "gauge");
  gauge("kv_cache_blocks_used", "KV cache blocks in use.", double(s.kv_blocks_used), "gauge");
  gauge("kv_cache_blocks_total", "KV cache blocks in the pool.", double(s.kv_blocks_total),
        "gauge");
  gauge("prompt_tokens_total", "Prompt tokens computed (prefill).", double(s.prompt_tokens),
        "counter");
  gauge("generation_tokens_total", "Tokens generated.", double(s.generation_tokens), "counter");
  gauge("prefix_cache_hits_total", "Prompt tokens served from the prefix cache.",
        double(s.prefix_cache_hit_tokens), "counter");
  gauge("num_preemptions_total", "Sequences preempted for lack of KV blocks.",
        double(s.num_preemptions), "counter");

  std::lock_guard lock(mu_);
  Header(out, "moeserve:request_success_total", "counter", "Finished requests by finish reason.");
  for (const char* reason : {"stop", "length", "abort"}) {
    auto it = success_by_reason_.find(reason);
    out += "moeserve:request_success_total{" + labels + ",finished_reason=\"" + reason + "\"} " +
           std::to_string(it == success_by_reason_.end() ? 0 : it->second) + "\n";
  }
  Header(out, "moeserve:time_to_first_token_seconds", "histogram",
         "Time from request arrival to its first token.");
  ttft_.Render("moeserve:time_to_first_token_seconds", labels, out);
  Header(out, "moeserve:time_per_output_token_seconds", "histogram",
         "Mean time between output tokens of a request.");
  tpot_.Render("moeserve:time_per_output_token_seconds", labels, out);
  Header(out, "moeserve:e2e_request_latency_seconds", "histogram",
         "Time from request arrival to its last token.");
  e2e_.Render("moeserve:e2e_request_latency_seconds", labels, out);
  Header(out, "moeserve:request_generation_tokens", "histogram", "Output tokens per request.");
  output_tokens_.Render("moeserve:request_generation_tokens", labels, out);
  return out;
}

}  // namespace moeserve::server
