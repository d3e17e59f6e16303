// `moeserve eval gsm8k`: runs GSM8K against any OpenAI-compatible completions server with
// lm-eval's or vLLM's prompts and scoring (gsm8k.h), concurrently, and reports like lm-eval.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace moeserve::client {

enum class Gsm8kScoring { kLmEval, kVllm };

struct Gsm8kEvalOptions {
  std::string base_url = "http://127.0.0.1:8000/v1";
  std::string model;  // empty: the first model the server lists
  std::string api_key;
  std::string data_path;          // test jsonl
  std::string fewshot_data_path;  // train jsonl
  Gsm8kScoring scoring = Gsm8kScoring::kLmEval;
  size_t num_fewshot = 5;
  size_t limit = 0;  // 0: every test question
  size_t concurrency = 1;
  size_t max_tokens = 256;
  uint64_t seed = 1234;  // lm-eval's fewshot seed; also sent as the request's "seed"
  // Appended to the task's stop sequences; lm-eval appends the tokenizer's EOS text this way.
  std::vector<std::string> extra_stops;
  int max_retries = 3;
  double timeout_s = 600;
  bool progress = true;
};

struct Gsm8kResult {
  // lm-eval: "strict-match" and "flexible-extract" exact_match; vLLM: "accuracy", "invalid_rate".
  struct Metric {
    std::string filter;
    std::string name;
    double value = 0;
    double std_error = 0;  // lm-eval's mean_stderr
    bool higher_is_better = true;
  };
  std::vector<Metric> metrics;
  size_t num_samples = 0;
  size_t failed_requests = 0;
  double duration_s = 0;
  size_t completion_tokens = 0;  // from the responses' usage, where the server reports it
  nlohmann::json report;         // the --output document: settings, results, per-question records
};

// Loads the data, sends every request, scores. Throws moeserve::Error on bad options or data;
// requests that fail after their retries are recorded, scored as wrong, and counted.
Gsm8kResult RunGsm8kEval(const Gsm8kEvalOptions& options);

// lm-eval's summary table (|Tasks|Version|Filter|n-shot|Metric| |Value| |Stderr|).
std::string FormatGsm8kTable(const Gsm8kResult& result, size_t num_fewshot);

// The default data directory: $MOESERVE_GSM8K_DIR, else the first of `candidates` holding
// test.jsonl; empty when none does.
std::string FindGsm8kDir(const std::vector<std::string>& candidates);

}  // namespace moeserve::client
