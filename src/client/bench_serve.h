// `moeserve bench serve` (and `moeserve bench-serve`): load-tests any OpenAI-compatible server the
// way `vllm bench serve` does with its random dataset. Prompts are random token ids sent as
// token-id prompts to /v1/completions with ignore_eos, so every request generates exactly
// max_tokens tokens; each response is streamed (SSE) to time TTFT, ITL, TPOT and end-to-end
// latency; the summary uses vLLM's definitions and layout so the numbers can be compared.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace moeserve::client {

struct ServeBenchOptions {
  std::string base_url = "http://127.0.0.1:8000";  // "/v1" is assumed when there is no path
  std::string model;                               // empty: the first model the server lists
  std::string api_key;
  size_t num_prompts = 1000;
  size_t max_concurrency = 0;  // 0: no limit beyond the request rate
  size_t random_input_len = 1024;
  size_t random_output_len = 128;
  double random_range_ratio = 0.0;   // lengths uniform in [len * (1 - r), len * (1 + r)]
  size_t random_vocab_size = 32000;  // token ids are drawn below this
  double request_rate = std::numeric_limits<double>::infinity();  // requests/s; inf: all at once
  double burstiness = 1.0;  // gamma shape of the inter-arrival times (1: Poisson process)
  uint64_t seed = 0;
  std::string output_json;  // empty: no JSON file
  double timeout_s = 600;
  bool progress = true;
};

// One request's timings, as vLLM's RequestFuncOutput.
struct RequestOutcome {
  bool success = false;
  std::string error;
  size_t prompt_len = 0;
  size_t expected_output_len = 0;
  size_t output_tokens = 0;  // usage.completion_tokens, else the number of chunks with text
  double ttft_s = 0;
  double latency_s = 0;       // send to last chunk
  std::vector<double> itl_s;  // gaps between consecutive chunks
};

struct LatencySummary {
  double mean_ms = 0, median_ms = 0, std_ms = 0, p99_ms = 0;
};

struct ServeBenchResult {
  size_t completed = 0;
  size_t failed = 0;
  double duration_s = 0;
  size_t total_input_tokens = 0;
  size_t total_output_tokens = 0;
  double request_throughput = 0;      // req/s
  double output_throughput = 0;       // tok/s
  double total_token_throughput = 0;  // tok/s
  LatencySummary ttft, tpot, itl, e2el;
  std::vector<RequestOutcome> requests;
  size_t max_concurrency_used = 0;  // workers actually run (after the open-files cap)
};

// The random dataset: per-request prompt token ids and output lengths (deterministic in seed).
struct RandomRequest {
  std::vector<int64_t> prompt_ids;
  size_t output_len = 0;
};
std::vector<RandomRequest> MakeRandomRequests(const ServeBenchOptions& options);

// Sends the requests, streams the answers and computes the metrics; progress on stderr only.
ServeBenchResult RunServeBench(const ServeBenchOptions& options);
// Summary lines in vLLM's layout.
std::string FormatServeBenchReport(const ServeBenchResult& result,
                                   const ServeBenchOptions& options);
nlohmann::json ServeBenchJson(const ServeBenchResult& result, const ServeBenchOptions& options);

// CLI: the options, and the whole command (run, print, write --output-json). Returns the exit
// code: 0, or 1 when no request succeeded.
void AddServeBenchOptions(CLI::App& app, ServeBenchOptions& options);
int RunServeBenchmark(const ServeBenchOptions& options);

}  // namespace moeserve::client
