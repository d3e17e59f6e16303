#include "client/bench_serve.h"

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <thread>

#include "client/openai_client.h"
#include "client/progress.h"
#include "client/python_random.h"
#include "client/stats.h"
#include "core/check.h"
#include "core/log.h"

namespace moeserve::client {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

LatencySummary Summarize(const std::vector<double>& seconds) {
  std::vector<double> ms(seconds.size());
  for (size_t i = 0; i < ms.size(); ++i) ms[i] = seconds[i] * 1000.0;
  return {Mean(ms), Percentile(ms, 50), StdDev(ms), Percentile(ms, 99)};
}

// Open sockets are files: keep the number of connections well under the process's limit.
size_t MaxConnections() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return 4096;
  return lim.rlim_cur > 128 ? std::min<size_t>(lim.rlim_cur - 64, 4096) : 16;
}

RequestOutcome SendOne(OpenAIClient& client, const std::string& model, const RandomRequest& req) {
  RequestOutcome out;
  out.prompt_len = req.prompt_ids.size();
  out.expected_output_len = req.output_len;
  const nlohmann::json body = {{"model", model},
                               {"prompt", req.prompt_ids},
                               {"max_tokens", req.output_len},
                               {"temperature", 0.0},
                               {"ignore_eos", true},
                               {"stream", true},
                               {"stream_options", {{"include_usage", true}}}};
  size_t chunks = 0;
  bool usage_seen = false;
  Clock::time_point last;
  const Clock::time_point start = Clock::now();
  try {
    client.StreamComplete(body, [&](const nlohmann::json& event) {
      const Clock::time_point now = Clock::now();
      // vLLM times every event that carries choices; the usage event (empty choices) is not a
      // token. Usage is read wherever it appears, since servers differ in where they put it.
      if (event.contains("choices") && event["choices"].is_array() && !event["choices"].empty()) {
        if (chunks == 0)
          out.ttft_s = Seconds(start, now);
        else
          out.itl_s.push_back(Seconds(last, now));
        last = now;
        ++chunks;
      }
      if (event.contains("usage") && event["usage"].is_object() &&
          event["usage"].contains("completion_tokens") &&
          event["usage"]["completion_tokens"].is_number_integer()) {
        out.output_tokens = event["usage"]["completion_tokens"].get<size_t>();
        usage_seen = true;
      }
    });
    if (chunks == 0) {
      out.error = "never received a chunk to time the first token";
      return out;
    }
    out.latency_s = Seconds(start, last);
    if (!usage_seen) out.output_tokens = chunks;
    out.success = true;
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

}  // namespace

std::vector<RandomRequest> MakeRandomRequests(const ServeBenchOptions& o) {
  if (o.random_vocab_size == 0) Fail("--random-vocab-size must be positive");
  if (o.random_range_ratio < 0 || o.random_range_ratio >= 1)
    Fail("--random-range-ratio must be in [0, 1)");
  PythonRandom rng(o.seed);
  const auto span = [&](size_t len, size_t min_len) {
    const size_t lo = std::max(min_len, static_cast<size_t>(len * (1 - o.random_range_ratio)));
    const size_t hi = std::max(lo, static_cast<size_t>(len * (1 + o.random_range_ratio)));
    return std::pair{lo, hi};
  };
  const auto [in_lo, in_hi] = span(o.random_input_len, 1);
  const auto [out_lo, out_hi] = span(o.random_output_len, 1);
  std::vector<RandomRequest> reqs(o.num_prompts);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const size_t in_len = in_lo + rng.RandBelow(in_hi - in_lo + 1);
    reqs[i].output_len = out_lo + rng.RandBelow(out_hi - out_lo + 1);
    // vLLM's random dataset: a random offset, then consecutive ids, so no two prompts share a
    // prefix and the prefix cache cannot flatter the numbers.
    const uint64_t offset = rng.RandBelow(o.random_vocab_size);
    reqs[i].prompt_ids.resize(in_len);
    for (size_t j = 0; j < in_len; ++j)
      reqs[i].prompt_ids[j] = static_cast<int64_t>((offset + i + j) % o.random_vocab_size);
  }
  return reqs;
}

ServeBenchResult RunServeBench(const ServeBenchOptions& o) {
  if (o.num_prompts == 0) Fail("--num-prompts must be positive");
  if (!(o.request_rate > 0)) Fail("--request-rate must be positive (inf: all at once)");
  if (!(o.burstiness > 0)) Fail("--burstiness must be positive");
  const std::vector<RandomRequest> reqs = MakeRandomRequests(o);

  // Arrival offsets: gamma-distributed gaps with mean 1/rate (exponential when burstiness is 1).
  std::vector<double> arrival_s(reqs.size(), 0.0);
  if (std::isfinite(o.request_rate)) {
    std::mt19937_64 gen(o.seed);
    std::gamma_distribution<double> gap(o.burstiness, 1.0 / (o.request_rate * o.burstiness));
    double t = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      arrival_s[i] = t;
      t += gap(gen);
    }
  }

  const Endpoint endpoint = ParseBaseUrl(o.base_url);
  ClientOptions copts;
  copts.api_key = o.api_key;
  copts.read_timeout_s = o.timeout_s;
  copts.max_retries = 0;  // a retried request would time the retry, not the server
  const std::string model = o.model.empty() ? FirstServedModel(endpoint, copts) : o.model;

  size_t workers = o.max_concurrency ? std::min(o.max_concurrency, reqs.size()) : reqs.size();
  if (const size_t cap = MaxConnections(); workers > cap) {
    LogWarn("bench serve: at most ", cap, " requests in flight (open-files limit), not ", workers);
    workers = cap;
  }
  std::vector<std::unique_ptr<OpenAIClient>> clients;
  for (size_t w = 0; w < workers; ++w)
    clients.push_back(std::make_unique<OpenAIClient>(endpoint, copts));

  ServeBenchResult r;
  r.max_concurrency_used = workers;
  r.requests.resize(reqs.size());
  ProgressBar bar("bench serve", reqs.size(), o.progress);
  const Clock::time_point t0 = Clock::now();
  // Requests are taken in arrival order by the first free worker, which waits for the arrival
  // time: the same schedule as vLLM's arrival loop feeding a semaphore of max_concurrency.
  ParallelFor(reqs.size(), workers, [&](size_t w, size_t i) {
    std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(arrival_s[i])));
    r.requests[i] = SendOne(*clients[w], model, reqs[i]);
    bar.Advance();
  });
  r.duration_s = Seconds(t0, Clock::now());
  bar.Finish();

  std::vector<double> ttfts, tpots, itls, e2els;
  for (const RequestOutcome& q : r.requests) {
    if (!q.success) {
      ++r.failed;
      continue;
    }
    ++r.completed;
    r.total_input_tokens += q.prompt_len;
    r.total_output_tokens += q.output_tokens;
    if (q.output_tokens > 1) tpots.push_back((q.latency_s - q.ttft_s) / (q.output_tokens - 1));
    itls.insert(itls.end(), q.itl_s.begin(), q.itl_s.end());
    ttfts.push_back(q.ttft_s);
    e2els.push_back(q.latency_s);
  }
  r.request_throughput = r.completed / r.duration_s;
  r.output_throughput = r.total_output_tokens / r.duration_s;
  r.total_token_throughput = (r.total_input_tokens + r.total_output_tokens) / r.duration_s;
  r.ttft = Summarize(ttfts);
  r.tpot = Summarize(tpots);
  r.itl = Summarize(itls);
  r.e2el = Summarize(e2els);
  return r;
}

std::string FormatServeBenchReport(const ServeBenchResult& r, const ServeBenchOptions& o) {
  std::string out;
  char line[160];
  const auto row = [&](const char* label, const std::string& value) {
    std::snprintf(line, sizeof line, "%-40s %-10s\n", label, value.c_str());
    out += line;
  };
  const auto f2 = [](double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%.2f", v);
    return std::string(b);
  };
  const auto title = [&](const std::string& s, char fill) {
    const size_t n = 50, pad = n > s.size() ? n - s.size() : 0;
    out += std::string(pad / 2, fill) + s + std::string(pad - pad / 2, fill) + "\n";
  };
  title(" Serving Benchmark Result ", '=');
  row("Successful requests:", std::to_string(r.completed));
  if (r.failed) row("Failed requests:", std::to_string(r.failed));
  if (o.max_concurrency) row("Maximum request concurrency:", std::to_string(o.max_concurrency));
  if (std::isfinite(o.request_rate)) row("Request rate configured (RPS):", f2(o.request_rate));
  row("Benchmark duration (s):", f2(r.duration_s));
  row("Total input tokens:", std::to_string(r.total_input_tokens));
  row("Total generated tokens:", std::to_string(r.total_output_tokens));
  row("Request throughput (req/s):", f2(r.request_throughput));
  row("Output token throughput (tok/s):", f2(r.output_throughput));
  row("Total Token throughput (tok/s):", f2(r.total_token_throughput));
  const auto section = [&](const char* heading, const char* name, const LatencySummary& s) {
    title(heading, '-');
    row(("Mean " + std::string(name) + " (ms):").c_str(), f2(s.mean_ms));
    row(("Median " + std::string(name) + " (ms):").c_str(), f2(s.median_ms));
    row(("P99 " + std::string(name) + " (ms):").c_str(), f2(s.p99_ms));
  };
  section("Time to First Token", "TTFT", r.ttft);
  section("Time per Output Token (excl. 1st token)", "TPOT", r.tpot);
  section("Inter-token Latency", "ITL", r.itl);
  section("End-to-end Latency", "E2EL", r.e2el);
  out += std::string(50, '=') + "\n";
  return out;
}

nlohmann::json ServeBenchJson(const ServeBenchResult& r, const ServeBenchOptions& o) {
  nlohmann::json j = {
      {"backend", "openai"},
      {"base_url", o.base_url},
      {"model_id", o.model},
      {"dataset_name", "random"},
      {"random_input_len", o.random_input_len},
      {"random_output_len", o.random_output_len},
      {"random_range_ratio", o.random_range_ratio},
      {"num_prompts", o.num_prompts},
      {"request_rate",
       std::isfinite(o.request_rate) ? nlohmann::json(o.request_rate) : nlohmann::json("inf")},
      {"burstiness", o.burstiness},
      {"max_concurrency", o.max_concurrency ? nlohmann::json(o.max_concurrency) : nlohmann::json()},
      {"seed", o.seed},
      {"duration", r.duration_s},
      {"completed", r.completed},
      {"failed", r.failed},
      {"total_input_tokens", r.total_input_tokens},
      {"total_output_tokens", r.total_output_tokens},
      {"request_throughput", r.request_throughput},
      {"output_throughput", r.output_throughput},
      {"total_token_throughput", r.total_token_throughput},
  };
  const auto put = [&](const char* name, const LatencySummary& s) {
    const std::string n = name;
    j["mean_" + n + "_ms"] = s.mean_ms;
    j["median_" + n + "_ms"] = s.median_ms;
    j["std_" + n + "_ms"] = s.std_ms;
    j["p99_" + n + "_ms"] = s.p99_ms;
  };
  put("ttft", r.ttft);
  put("tpot", r.tpot);
  put("itl", r.itl);
  put("e2el", r.e2el);
  nlohmann::json input_lens = nlohmann::json::array(), output_lens = nlohmann::json::array(),
                 ttfts = nlohmann::json::array(), itls = nlohmann::json::array(),
                 errors = nlohmann::json::array();
  for (const auto& q : r.requests) {
    input_lens.push_back(q.prompt_len);
    output_lens.push_back(q.success ? q.output_tokens : 0);
    ttfts.push_back(q.ttft_s);
    itls.push_back(q.itl_s);
    errors.push_back(q.error);
  }
  j["input_lens"] = std::move(input_lens);
  j["output_lens"] = std::move(output_lens);
  j["ttfts"] = std::move(ttfts);
  j["itls"] = std::move(itls);
  j["errors"] = std::move(errors);
  return j;
}

void AddServeBenchOptions(CLI::App& app, ServeBenchOptions& o) {
  app.add_option("--base-url", o.base_url,
                 "Server URL, e.g. http://127.0.0.1:8000 or http://127.0.0.1:8000/v1")
      ->capture_default_str();
  app.add_option("--model", o.model, "Model name to send (default: the server's first model)");
  app.add_option("--api-key", o.api_key, "Bearer token for the server");
  app.add_option("--num-prompts", o.num_prompts, "Number of requests")->capture_default_str();
  app.add_option("--max-concurrency", o.max_concurrency,
                 "Most requests in flight at once (0: no limit)")
      ->capture_default_str();
  app.add_option("--random-input-len", o.random_input_len, "Prompt tokens per request")
      ->capture_default_str();
  app.add_option("--random-output-len", o.random_output_len, "Generated tokens per request")
      ->capture_default_str();
  app.add_option("--random-range-ratio", o.random_range_ratio,
                 "Lengths drawn uniformly in [len*(1-r), len*(1+r)]")
      ->capture_default_str();
  app.add_option("--random-vocab-size", o.random_vocab_size,
                 "Random prompt token ids are drawn below this")
      ->capture_default_str();
  app.add_option("--request-rate", o.request_rate, "Requests per second (inf: all at once)")
      ->capture_default_str();
  app.add_option("--burstiness", o.burstiness, "Gamma shape of arrival gaps (1: Poisson)")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of the random dataset and arrivals")
      ->capture_default_str();
  app.add_option("--output-json", o.output_json, "Write the results (and per-request data) here");
  app.add_option("--timeout", o.timeout_s, "Seconds to wait for one response")
      ->capture_default_str();
  app.add_flag("!--no-progress", o.progress, "No progress bar on stderr");
}

int RunServeBenchmark(const ServeBenchOptions& o) {
  ServeBenchOptions shown = o;
  if (shown.model.empty()) {
    ClientOptions copts;
    copts.api_key = o.api_key;
    shown.model = FirstServedModel(ParseBaseUrl(o.base_url), copts);
  }
  std::printf("bench serve: %s, model %s, %zu prompts of %zu tokens -> %zu tokens\n",
              o.base_url.c_str(), shown.model.c_str(), o.num_prompts, o.random_input_len,
              o.random_output_len);
  std::fflush(stdout);
  const ServeBenchResult r = RunServeBench(shown);
  std::fputs(FormatServeBenchReport(r, shown).c_str(), stdout);
  for (const auto& q : r.requests)
    if (!q.success) {
      std::fprintf(stderr, "bench serve: first failure: %s\n", q.error.c_str());
      break;
    }
  if (!o.output_json.empty()) {
    std::ofstream f(o.output_json);
    if (!f) Fail("cannot write ", o.output_json);
    f << ServeBenchJson(r, shown).dump(2) << "\n";
    std::printf("results written to %s\n", o.output_json.c_str());
  }
  return r.completed > 0 ? 0 : 1;
}

}  // namespace moeserve::client
