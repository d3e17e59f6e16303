#include "client/gsm8k.h"

#include <cctype>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/check.h"

namespace moeserve::client::gsm8k {
namespace {

bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}
// [0-9.,] of strict-match.
bool IsStrictChar(char c) {
  return IsDigit(c) || c == '.' || c == ',';
}
// [$0-9.,] of flexible-extract's first alternative.
bool IsFlexChar(char c) {
  return IsStrictChar(c) || c == '$';
}

template <typename Pred>
size_t RunLength(const std::string& s, size_t pos, Pred pred) {
  size_t end = pos;
  while (end < s.size() && pred(s[end])) ++end;
  return end - pos;
}

void EraseAll(std::string& s, char c) {
  std::erase(s, c);
}

}  // namespace

std::vector<Problem> LoadJsonl(const std::string& path) {
  std::ifstream in(path);
  if (!in) Fail("cannot open GSM8K file ", path);
  std::vector<Problem> problems;
  std::string line;
  for (size_t line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      Fail(path, ":", line_no, ": not JSON: ", e.what());
    }
    if (!j.is_object() || !j.contains("question") || !j.contains("answer") ||
        !j["question"].is_string() || !j["answer"].is_string())
      Fail(path, ":", line_no, ": expected an object with string fields question and answer");
    problems.push_back({j["question"].get<std::string>(), j["answer"].get<std::string>()});
  }
  if (problems.empty()) Fail("GSM8K file ", path, " has no problems");
  return problems;
}

std::string DocToText(const Problem& p) {
  return "Question: " + p.question + "\nAnswer:";
}

std::string LmEvalPrompt(const std::vector<Problem>& train, const std::vector<size_t>& shots,
                         const Problem& question) {
  std::string prompt;
  for (size_t i : shots) {
    MOESERVE_CHECK(i < train.size(), "shot ", i, " of ", train.size());
    // lm-eval drops the delimiter's trailing space when the target itself starts with whitespace.
    const Problem& shot = train[i];
    prompt += DocToText(shot);
    if (shot.answer.empty() || !std::isspace(static_cast<unsigned char>(shot.answer[0])))
      prompt += " ";
    prompt += shot.answer;
    prompt += "\n\n";
  }
  return prompt + DocToText(question);
}

std::vector<std::string> LmEvalStops() {
  return {"Question:", "</s>", "<|im_end|>"};
}

// Python's re.search for `#### (\-?[0-9\.\,]+)`: the first "#### " followed by an optional minus
// and at least one of [0-9.,]. A minus not followed by that class cannot match (the optional
// minus backtracks to nothing and "-" is outside the class).
std::string StrictMatch(const std::string& response) {
  for (size_t p = response.find("#### "); p != std::string::npos;
       p = response.find("#### ", p + 1)) {
    size_t q = p + 5;
    const bool minus = q < response.size() && response[q] == '-';
    const size_t run = RunLength(response, q + (minus ? 1 : 0), IsStrictChar);
    if (run > 0) return response.substr(q, run + (minus ? 1 : 0));
  }
  return kInvalid;
}

// Python's re.findall for `(-?[$0-9.,]{2,})|(-?[0-9]+)`, keeping the last match. At each position
// the first alternative is tried before the second, each with its optional minus taken greedily
// first; after a match the scan resumes at its end (matches never overlap and are never empty).
std::string FlexibleExtract(const std::string& response) {
  std::string last;
  bool found = false;
  size_t p = 0;
  while (p < response.size()) {
    const bool minus = response[p] == '-';
    const size_t body = p + (minus ? 1 : 0);
    size_t len = 0;
    if (size_t run = RunLength(response, body, IsFlexChar); run >= 2) {
      len = run + (minus ? 1 : 0);  // alternative 1
    } else if (size_t digits = RunLength(response, body, IsDigit); digits >= 1) {
      len = digits + (minus ? 1 : 0);  // alternative 2
    }
    if (len == 0) {
      ++p;
      continue;
    }
    last = response.substr(p, len);
    found = true;
    p += len;
  }
  return found ? last : std::string(kInvalid);
}

std::string NormalizeForExactMatch(std::string s) {
  EraseAll(s, ',');
  EraseAll(s, '$');
  // "(?s).*#### ": greedy, so one match that ends at the last "#### ".
  if (size_t p = s.rfind("#### "); p != std::string::npos) s.erase(0, p + 5);
  // "\.$": Python's `$` matches at the very end and just before a final newline.
  if (!s.empty() && s.back() == '.') {
    s.pop_back();
  } else if (s.size() >= 2 && s[s.size() - 1] == '\n' && s[s.size() - 2] == '.') {
    s.erase(s.size() - 2, 1);
  }
  // ignore_case. ASCII is enough: predictions come out of the filters above ([$0-9.,-] or
  // "[invalid]") and targets are what follows "#### ".
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

bool ExactMatch(const std::string& prediction, const std::string& target_answer) {
  return NormalizeForExactMatch(prediction) == NormalizeForExactMatch(target_answer);
}

std::string VllmPrompt(const std::vector<Problem>& train, size_t num_shots,
                       const Problem& question) {
  if (num_shots > train.size()) Fail(num_shots, " shots asked for, train has ", train.size());
  std::string prompt;
  for (size_t i = 0; i < num_shots; ++i)
    prompt += "Question: " + train[i].question + "\nAnswer: " + train[i].answer + "\n\n";
  return prompt + DocToText(question);
}

std::vector<std::string> VllmStops() {
  return {"Question", "Assistant:", "<|separator|>"};
}

std::optional<std::string> VllmAnswer(const std::string& text) {
  std::string s = text;
  EraseAll(s, ',');
  size_t end = s.size();
  while (end > 0 && !IsDigit(s[end - 1])) --end;
  if (end == 0) return std::nullopt;
  size_t begin = end;
  while (begin > 0 && IsDigit(s[begin - 1])) --begin;
  std::string digits = s.substr(begin, end - begin);
  // ast.literal_eval accepts "0", "000" but rejects other decimals with a leading zero ("007").
  const size_t first_nonzero = digits.find_first_not_of('0');
  if (first_nonzero == std::string::npos) return std::string("0");
  if (first_nonzero > 0) return std::nullopt;
  return digits;
}

MeanStderr MeanWithStderr(const std::vector<double>& values) {
  MeanStderr r;
  const size_t n = values.size();
  if (n == 0)
    return {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN()};
  double sum = 0;
  for (double v : values) sum += v;
  r.mean = sum / n;
  if (n < 2) {
    r.std_error = std::numeric_limits<double>::quiet_NaN();
    return r;
  }
  double ss = 0;
  for (double v : values) ss += (v - r.mean) * (v - r.mean);
  r.std_error = std::sqrt(ss / (n - 1) / n);
  return r;
}

}  // namespace moeserve::client::gsm8k
