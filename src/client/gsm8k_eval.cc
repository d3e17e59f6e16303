#include "client/gsm8k_eval.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>

#include "client/gsm8k.h"
#include "client/openai_client.h"
#include "client/progress.h"
#include "core/check.h"
#include "core/log.h"

namespace moeserve::client {
namespace {

struct Sample {
  std::string prompt;
  std::vector<size_t> shots;
  std::string response;
  std::string error;  // non-empty when the request failed
  std::optional<size_t> completion_tokens;
};

// Display width of UTF-8 text: code points (the table's only non-ASCII cells are one-column
// arrows).
size_t Width(const std::string& s) {
  size_t w = 0;
  for (unsigned char c : s) w += (c & 0xC0) != 0x80;
  return w;
}

std::string Pad(const std::string& s, size_t width, char align) {  // 'l', 'r', 'c'
  const size_t w = Width(s);
  if (w >= width) return s;
  const size_t gap = width - w;
  if (align == 'r') return std::string(gap, ' ') + s;
  if (align == 'l') return s + std::string(gap, ' ');
  return std::string(gap / 2, ' ') + s + std::string(gap - gap / 2, ' ');
}

std::string Fixed4(double v) {
  if (std::isnan(v)) return "N/A";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

nlohmann::json NumberOrNull(double v) {
  return std::isnan(v) ? nlohmann::json() : nlohmann::json(v);
}

}  // namespace

std::string FindGsm8kDir(const std::vector<std::string>& candidates) {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("MOESERVE_GSM8K_DIR")) dirs.push_back(env);
  dirs.insert(dirs.end(), candidates.begin(), candidates.end());
  for (const auto& d : dirs)
    if (std::filesystem::exists(std::filesystem::path(d) / "test.jsonl")) return d;
  return "";
}

Gsm8kResult RunGsm8kEval(const Gsm8kEvalOptions& o) {
  if (o.data_path.empty()) Fail("no GSM8K test data: pass --data (test.jsonl)");
  if (o.num_fewshot > 0 && o.fewshot_data_path.empty())
    Fail("no GSM8K train data for the shots: pass --fewshot-data (train.jsonl)");
  if (o.concurrency == 0) Fail("--concurrency must be at least 1");
  const bool lm_eval = o.scoring == Gsm8kScoring::kLmEval;
  std::vector<gsm8k::Problem> test = gsm8k::LoadJsonl(o.data_path);
  std::vector<gsm8k::Problem> train;
  if (o.num_fewshot > 0) train = gsm8k::LoadJsonl(o.fewshot_data_path);
  if (o.num_fewshot > train.size() && o.num_fewshot > 0)
    Fail(o.num_fewshot, " shots asked for, the train file has ", train.size());
  const size_t n = o.limit ? std::min(o.limit, test.size()) : test.size();

  // Prompts are built in question order before any request goes out: lm-eval's shot generator
  // is consumed one draw per question in that order.
  std::vector<Sample> samples(n);
  gsm8k::ShotSampler sampler(o.seed, train.size());
  for (size_t i = 0; i < n; ++i) {
    if (lm_eval) {
      if (o.num_fewshot > 0) samples[i].shots = sampler.Next(o.num_fewshot);
      samples[i].prompt = gsm8k::LmEvalPrompt(train, samples[i].shots, test[i]);
    } else {
      for (size_t s = 0; s < o.num_fewshot; ++s) samples[i].shots.push_back(s);
      samples[i].prompt = gsm8k::VllmPrompt(train, o.num_fewshot, test[i]);
    }
  }

  const Endpoint endpoint = ParseBaseUrl(o.base_url);
  ClientOptions copts;
  copts.api_key = o.api_key;
  copts.max_retries = o.max_retries;
  copts.read_timeout_s = o.timeout_s;
  const std::string model = o.model.empty() ? FirstServedModel(endpoint, copts) : o.model;
  std::vector<std::string> stops = lm_eval ? gsm8k::LmEvalStops() : gsm8k::VllmStops();
  for (const auto& s : o.extra_stops)
    if (std::find(stops.begin(), stops.end(), s) == stops.end()) stops.push_back(s);

  const size_t workers = std::min(o.concurrency, std::max<size_t>(n, 1));
  std::vector<std::unique_ptr<OpenAIClient>> clients;
  for (size_t w = 0; w < workers; ++w)
    clients.push_back(std::make_unique<OpenAIClient>(endpoint, copts));

  ProgressBar bar("gsm8k", n, o.progress);
  const auto t0 = std::chrono::steady_clock::now();
  ParallelFor(n, workers, [&](size_t w, size_t i) {
    Sample& s = samples[i];
    nlohmann::json body = {{"model", model},   {"prompt", s.prompt}, {"max_tokens", o.max_tokens},
                           {"temperature", 0}, {"stop", stops},      {"seed", o.seed}};
    try {
      const nlohmann::json res = clients[w]->Complete(body);
      const auto& choices = res.at("choices");
      if (!choices.is_array() || choices.empty()) Fail("response has no choices");
      const auto& text = choices[0].at("text");
      s.response = text.is_string() ? text.get<std::string>() : "";
      if (res.contains("usage") && res["usage"].is_object() &&
          res["usage"].contains("completion_tokens"))
        s.completion_tokens = res["usage"]["completion_tokens"].get<size_t>();
    } catch (const std::exception& e) {
      s.response.clear();
      s.error = e.what();
    }
    bar.Advance();
  });
  bar.Finish();

  Gsm8kResult r;
  r.num_samples = n;
  r.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json records = nlohmann::json::array();
  std::vector<double> strict_ok, flex_ok, vllm_ok, vllm_invalid;
  for (size_t i = 0; i < n; ++i) {
    const Sample& s = samples[i];
    if (!s.error.empty()) ++r.failed_requests;
    if (s.completion_tokens) r.completion_tokens += *s.completion_tokens;
    nlohmann::json rec = {
        {"doc_id", i},      {"question", test[i].question}, {"target", test[i].answer},
        {"shots", s.shots}, {"prompt", s.prompt},           {"response", s.response}};
    if (!s.error.empty()) rec["error"] = s.error;
    if (s.completion_tokens) rec["completion_tokens"] = *s.completion_tokens;
    if (lm_eval) {
      const std::string strict = gsm8k::StrictMatch(s.response);
      const std::string flex = gsm8k::FlexibleExtract(s.response);
      const bool strict_correct = gsm8k::ExactMatch(strict, test[i].answer);
      const bool flex_correct = gsm8k::ExactMatch(flex, test[i].answer);
      strict_ok.push_back(strict_correct);
      flex_ok.push_back(flex_correct);
      rec["strict-match"] = {{"extracted", strict}, {"exact_match", strict_correct ? 1 : 0}};
      rec["flexible-extract"] = {{"extracted", flex}, {"exact_match", flex_correct ? 1 : 0}};
    } else {
      const auto pred = gsm8k::VllmAnswer(s.response);
      const auto label = gsm8k::VllmAnswer(test[i].answer);
      if (!label) Fail("test question ", i, " has no numeric answer: ", test[i].answer);
      vllm_ok.push_back(pred && *pred == *label);
      vllm_invalid.push_back(!pred);
      rec["extracted"] = pred ? nlohmann::json(*pred) : nlohmann::json("[invalid]");
      rec["label"] = *label;
      rec["correct"] = vllm_ok.back() ? 1 : 0;
    }
    records.push_back(std::move(rec));
  }

  nlohmann::json task_results = {{"alias", "gsm8k"}};
  const auto add = [&](std::string filter, std::string name, const std::vector<double>& v,
                       bool higher_is_better) {
    const gsm8k::MeanStderr m = gsm8k::MeanWithStderr(v);
    r.metrics.push_back({filter, name, m.mean, m.std_error, higher_is_better});
    task_results[name + "," + filter] = NumberOrNull(m.mean);
    task_results[name + "_stderr," + filter] = NumberOrNull(m.std_error);
  };
  if (lm_eval) {
    add("flexible-extract", "exact_match", flex_ok, true);
    add("strict-match", "exact_match", strict_ok, true);
  } else {
    add("last-number", "accuracy", vllm_ok, true);
    add("last-number", "invalid_rate", vllm_invalid, false);
  }

  r.report = {
      {"task", "gsm8k"},
      {"version", 3},
      {"scoring", lm_eval ? "lm-eval" : "vllm"},
      {"config",
       {{"base_url", o.base_url},
        {"model", model},
        {"num_fewshot", o.num_fewshot},
        {"fewshot_seed", o.seed},
        {"limit", o.limit ? nlohmann::json(o.limit) : nlohmann::json()},
        {"max_tokens", o.max_tokens},
        {"temperature", 0},
        {"stop", stops},
        {"concurrency", o.concurrency},
        {"data", o.data_path},
        {"fewshot_data", o.fewshot_data_path}}},
      {"results", {{"gsm8k", task_results}}},
      {"n-samples", {{"gsm8k", {{"original", test.size()}, {"effective", n}}}}},
      {"failed_requests", r.failed_requests},
      {"duration_s", r.duration_s},
      {"completion_tokens", r.completion_tokens},
      {"samples", std::move(records)},
  };
  return r;
}

std::string FormatGsm8kTable(const Gsm8kResult& r, size_t num_fewshot) {
  const std::vector<std::string> header = {"Tasks", "Version", "Filter", "n-shot", "Metric",
                                           "",      "Value",   "",       "Stderr"};
  const std::string align = "lrlrllrlr";
  std::vector<std::vector<std::string>> rows;
  std::string last_filter;
  for (size_t i = 0; i < r.metrics.size(); ++i) {
    const auto& m = r.metrics[i];
    const bool first = i == 0;
    rows.push_back({first ? "gsm8k" : "", first ? "3" : "", m.filter == last_filter ? "" : m.filter,
                    std::to_string(num_fewshot), m.name, m.higher_is_better ? "↑" : "↓",
                    Fixed4(m.value), "±", Fixed4(m.std_error)});
    last_filter = m.filter;
  }
  std::vector<size_t> width(header.size(), 3);
  for (size_t c = 0; c < header.size(); ++c) {
    width[c] = std::max(width[c], Width(header[c]));
    for (const auto& row : rows) width[c] = std::max(width[c], Width(row[c]));
  }
  std::string out = "|";
  for (size_t c = 0; c < header.size(); ++c) out += Pad(header[c], width[c], 'c') + "|";
  out += "\n|";
  for (size_t c = 0; c < header.size(); ++c)
    out +=
        align[c] == 'r' ? std::string(width[c] - 1, '-') + ":|" : std::string(width[c], '-') + "|";
  out += "\n";
  for (const auto& row : rows) {
    out += "|";
    for (size_t c = 0; c < row.size(); ++c) out += Pad(row[c], width[c], align[c]) + "|";
    out += "\n";
  }
  return out;
}

}  // namespace moeserve::client
