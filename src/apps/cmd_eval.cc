// moeserve eval gsm8k: GSM8K accuracy of any OpenAI-compatible completions server, scored as
// lm-eval's gsm8k task (default) or vLLM's gsm8k script (--scoring vllm).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>

#include "apps/command_registry.h"
#include "client/gsm8k_eval.h"
#include "core/check.h"

namespace moeserve::apps {
namespace {

int RunGsm8k(client::Gsm8kEvalOptions o, const std::string& output_path) {
  const std::string dir = client::FindGsm8kDir(
      {MOESERVE_SOURCE_DIR "/data/gsm8k", MOESERVE_SOURCE_DIR "/../shared/data/gsm8k"});
  if (o.data_path.empty() && !dir.empty()) o.data_path = dir + "/test.jsonl";
  if (o.fewshot_data_path.empty() && !dir.empty()) o.fewshot_data_path = dir + "/train.jsonl";
  const bool lm_eval = o.scoring == client::Gsm8kScoring::kLmEval;
  std::fprintf(stderr, "gsm8k: %s, %s scoring, %zu-shot, concurrency %zu, data %s\n",
               o.base_url.c_str(), lm_eval ? "lm-eval" : "vllm", o.num_fewshot, o.concurrency,
               o.data_path.c_str());
  const client::Gsm8kResult r = client::RunGsm8kEval(o);
  const auto& cfg = r.report["config"];
  std::printf(
      "local-completions (model=%s,base_url=%s), gen_kwargs: (max_tokens=%zu,temperature=0), "
      "limit: %zu, num_fewshot: %zu, scoring: %s\n",
      cfg["model"].get<std::string>().c_str(), o.base_url.c_str(), o.max_tokens, r.num_samples,
      o.num_fewshot, lm_eval ? "lm-eval" : "vllm");
  std::fputs(client::FormatGsm8kTable(r, o.num_fewshot).c_str(), stdout);
  std::printf("\n%zu questions in %.1f s (%.2f questions/s)", r.num_samples, r.duration_s,
              r.num_samples / r.duration_s);
  if (r.completion_tokens)
    std::printf(", %zu completion tokens (%.1f tok/s)", r.completion_tokens,
                r.completion_tokens / r.duration_s);
  std::printf("\n");
  if (!output_path.empty()) {
    std::ofstream f(output_path);
    if (!f) Fail("cannot write ", output_path);
    f << r.report.dump(2) << "\n";
    std::printf("report written to %s\n", output_path.c_str());
  }
  if (r.failed_requests) {
    std::fprintf(stderr,
                 "gsm8k: %zu of %zu requests failed after retries and were scored as wrong; "
                 "see \"error\" in the report\n",
                 r.failed_requests, r.num_samples);
    return 1;
  }
  return 0;
}

CommandRegistration reg{
    "eval", "Evaluate an OpenAI-compatible server on a benchmark (gsm8k)",
    [](CLI::App& sub) -> CommandAction {
      sub.require_subcommand(1);
      CLI::App* gsm = sub.add_subcommand(
          "gsm8k", "GSM8K accuracy, scored like lm-eval's gsm8k task (or vLLM's gsm8k script)");
      auto o = std::make_shared<client::Gsm8kEvalOptions>();
      auto output = std::make_shared<std::string>();
      gsm->add_option("--base-url", o->base_url,
                      "OpenAI base URL (http://host:8000/v1) or lm-eval's .../v1/completions")
          ->capture_default_str();
      gsm->add_option("--model", o->model, "Model name to send (default: the server's first)");
      gsm->add_option("--api-key", o->api_key, "Bearer token for the server");
      gsm->add_option("--num-fewshot", o->num_fewshot, "Shots per prompt")->capture_default_str();
      gsm->add_option("--limit", o->limit, "Evaluate only the first N test questions (0: all)");
      gsm->add_option("--concurrency", o->concurrency, "Requests in flight")->capture_default_str();
      gsm->add_option("--data", o->data_path,
                      "GSM8K test jsonl (default: test.jsonl of $MOESERVE_GSM8K_DIR or the "
                      "project's shared data)");
      gsm->add_option("--fewshot-data", o->fewshot_data_path,
                      "GSM8K train jsonl the shots come from (default: beside --data's default)");
      auto scoring = std::make_shared<std::string>("lm-eval");
      gsm->add_option("--scoring", *scoring,
                      "lm-eval: sampled shots, strict-match/flexible-extract; vllm: first shots, "
                      "last number")
          ->check(CLI::IsMember({"lm-eval", "vllm"}))
          ->capture_default_str();
      gsm->add_option("--max-tokens", o->max_tokens, "Generation budget per question")
          ->capture_default_str();
      gsm->add_option("--seed", o->seed, "Few-shot sampling seed (lm-eval's fewshot seed)")
          ->capture_default_str();
      gsm->add_option("--stop", o->extra_stops,
                      "Extra stop strings (lm-eval adds the tokenizer's EOS text)");
      gsm->add_option("--max-retries", o->max_retries,
                      "Retries of a request after connection errors, 429 and 5xx")
          ->capture_default_str();
      gsm->add_option("--timeout", o->timeout_s, "Seconds to wait for one response")
          ->capture_default_str();
      gsm->add_flag("!--no-progress", o->progress, "No progress bar on stderr");
      gsm->add_option("--output", *output, "Write the JSON report (per-question records) here");
      return [o, output, scoring, gsm]() -> int {
        o->scoring =
            *scoring == "vllm" ? client::Gsm8kScoring::kVllm : client::Gsm8kScoring::kLmEval;
        if (gsm->parsed()) return RunGsm8k(*o, *output);
        Fail("eval: unknown benchmark");
      };
    }};

}  // namespace
}  // namespace moeserve::apps
