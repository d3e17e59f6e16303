// GSM8K: the data, the prompts and the scoring of the two harnesses people quote numbers from
// (MINIMAX-M2.md "GSM8K as the accuracy yardstick"):
//  - lm-eval's `gsm8k` task (version 3): shots drawn by random.Random(seed).sample(train, k), one
//    draw per evaluated question in order; "strict-match" and "flexible-extract" filters; exact
//    match after lm-eval's regexes_to_ignore and ignore_case.
//  - vLLM's gsm8k script: the first k train items as shots, the answer is the last run of digits.
// Everything here is pure (no I/O beyond LoadJsonl), so the scoring is unit-tested on its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "client/python_random.h"

namespace moeserve::client::gsm8k {

struct Problem {
  std::string question;
  std::string answer;  // full rationale ending in "#### N"
};

// One {"question": ..., "answer": ...} object per line (the HF dataset's jsonl export).
std::vector<Problem> LoadJsonl(const std::string& path);

// ---- lm-eval ----

// lm-eval's fallback when a filter's regex finds nothing.
inline constexpr const char* kInvalid = "[invalid]";

// doc_to_text: "Question: {question}\nAnswer:".
std::string DocToText(const Problem& p);

// Draws the shot indices the way lm-eval's ContextSampler does: one generator for the whole run,
// Sample(num_train, num_fewshot) per evaluated question, in question order.
class ShotSampler {
 public:
  ShotSampler(uint64_t seed, size_t num_train) : rng_(seed), num_train_(num_train) {}
  std::vector<size_t> Next(size_t num_fewshot) { return rng_.Sample(num_train_, num_fewshot); }

 private:
  PythonRandom rng_;
  size_t num_train_;
};

// Shots as doc_to_text + target_delimiter " " + answer + fewshot_delimiter "\n\n", then the
// question's doc_to_text.
std::string LmEvalPrompt(const std::vector<Problem>& train, const std::vector<size_t>& shots,
                         const Problem& question);

// Generation stops of the task yaml.
std::vector<std::string> LmEvalStops();

// strict-match: regex `#### (\-?[0-9\.\,]+)`, first match, else "[invalid]".
std::string StrictMatch(const std::string& response);
// flexible-extract: regex `(-?[$0-9.,]{2,})|(-?[0-9]+)`, last match (group_select -1), the first
// non-empty group of it, else "[invalid]".
std::string FlexibleExtract(const std::string& response);
// exact_match's preprocessing, in order: drop ",", drop "$", drop everything through the last
// "#### ", drop a "." at the end (Python's `$` also matches before a final "\n"), lower-case.
std::string NormalizeForExactMatch(std::string s);
// exact_match of one prediction against the doc's full answer.
bool ExactMatch(const std::string& prediction, const std::string& target_answer);

// ---- vLLM ----

// The first `num_shots` train items, "Question: {q}\nAnswer: {a}\n\n" each, then the question.
std::string VllmPrompt(const std::vector<Problem>& train, size_t num_shots,
                       const Problem& question);
std::vector<std::string> VllmStops();
// get_answer_value: drop ",", take the last run of ASCII digits and read it as a Python literal.
// nullopt stands for vLLM's INVALID (no digits, or a literal Python rejects such as "007").
// The value is returned in canonical decimal form (no leading zeros) so big numbers compare too.
std::optional<std::string> VllmAnswer(const std::string& text);

// ---- aggregation ----

struct MeanStderr {
  double mean = 0;
  double std_error = 0;  // NaN when n < 2 (lm-eval's sample variance needs two values)
};
// lm-eval's mean and mean_stderr: sqrt(sample variance (ddof 1) / n).
MeanStderr MeanWithStderr(const std::vector<double>& values);

}  // namespace moeserve::client::gsm8k
