// Unit tests of structured outputs on the request side: every accepted spelling becomes the
// right ConstraintSpec, what must be refused is a 400, compiled grammars are cached per spec
// (LRU), the vocabulary carries the tokenizer's bytes, and the tool-call grammars accept exactly
// replies whose calls the reply parser reads back with typed arguments.
#include <gtest/gtest.h>

#include <random>

#include "../grammar/test_util.h"
#include "chat/reply_parser.h"
#include "engine/sampling_params.h"
#include "grammar/earley.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "server/api_error.h"
#include "server/structured_output.h"
#include "server/tool_call_grammar.h"

namespace moeserve::server {
namespace {

using Kind = ConstraintSpec::Kind;

ConstraintSpec Parse(const std::string& body) {
  return ParseConstraint(Json::parse(body));
}

int StatusOf(const std::string& body) {
  try {
    Parse(body);
  } catch (const ApiError& e) {
    return e.status();
  }
  return 200;
}

TEST(ParseConstraint, EverySpelling) {
  EXPECT_EQ(Parse(R"({})").kind, Kind::kNone);
  EXPECT_EQ(Parse(R"({"response_format": {"type": "text"}})").kind, Kind::kNone);
  EXPECT_EQ(Parse(R"({"response_format": {"type": "json_object"}})").kind, Kind::kJsonObject);
  const ConstraintSpec js = Parse(
      R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": true,
          "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}}})");
  EXPECT_EQ(js.kind, Kind::kJsonSchema);
  EXPECT_EQ(js.schema["properties"]["a"]["type"], "integer");
  EXPECT_EQ(js.field, "response_format");
  EXPECT_EQ(
      Parse(R"({"response_format": {"type": "json_object", "schema": {"type": "object"}}})").kind,
      Kind::kJsonSchema);  // llama.cpp
  EXPECT_EQ(Parse(R"({"structured_outputs": {"json": {"type": "string"}}})").kind,
            Kind::kJsonSchema);
  EXPECT_EQ(Parse(R"({"structured_outputs": {"regex": "[a-z]+"}})").kind, Kind::kRegex);
  EXPECT_EQ(Parse(R"({"structured_outputs": {"choice": ["a", "b"]}})").choices.size(), 2u);
  EXPECT_EQ(Parse(R"({"structured_outputs": {"grammar": "root ::= \"x\""}})").kind, Kind::kGrammar);
  EXPECT_EQ(Parse(R"({"structured_outputs": {"json_object": true}})").kind, Kind::kJsonObject);
  EXPECT_TRUE(
      Parse(R"({"structured_outputs": {"json_object": true, "disable_any_whitespace": true}})")
          .compact);
  EXPECT_EQ(Parse(R"({"guided_json": "{\"type\": \"integer\"}"})").schema["type"], "integer");
  EXPECT_EQ(Parse(R"({"guided_regex": "a+"})").text, "a+");
  EXPECT_EQ(Parse(R"({"guided_choice": ["x"]})").kind, Kind::kChoice);
  EXPECT_EQ(Parse(R"({"guided_grammar": "root ::= \"x\""})").kind, Kind::kGrammar);
  EXPECT_EQ(Parse(R"({"grammar": "root ::= \"x\""})").field, "grammar");
  EXPECT_EQ(Parse(R"({"json_schema": {"type": "object"}})").field, "json_schema");
}

TEST(ParseConstraint, RefusedWith400) {
  for (const char* body : {
           R"({"response_format": {"type": "bogus"}})",
           R"({"response_format": {"type": "json_schema"}})",
           R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}})",
           R"({"response_format": "json"})",
           R"({"response_format": {"type": "json_object"}, "guided_regex": "a"})",
           R"({"guided_json": {"type": "object"}, "guided_choice": ["a"]})",
           R"({"structured_outputs": {"regex": "a", "choice": ["a"]}})",
           R"({"structured_outputs": {"structural_tag": "{}"}})",
           R"({"structured_outputs": "json"})",
           R"({"guided_choice": []})",
           R"({"guided_choice": [1, 2]})",
           R"({"guided_json": "{not json"})",
           R"({"guided_regex": 5})",
           R"({"grammar": "root ::= \"x\"", "json_schema": {"type": "object"}})",
           R"({"guided_whitespace_pattern": "\\s*", "guided_json": {}})",
       })
    EXPECT_EQ(StatusOf(body), 400) << body;
}

tokenizer::Tokenizer TestTokenizer() {
  return tokenizer::Tokenizer::FromModelDir(MOESERVE_TEST_MODEL_DIR);
}

TEST(StructuredOutputs, VocabularyHasTokenBytesSpecialsAndEos) {
  const tokenizer::Tokenizer tok = TestTokenizer();
  StructuredOutputs outputs(tok);
  auto vocab = outputs.vocabulary();
  ASSERT_EQ(vocab->size(), tok.VocabSize());
  const int32_t think_end = *tok.TokenToId("</think>");
  EXPECT_TRUE(vocab->is_special(think_end));
  EXPECT_EQ(vocab->bytes(think_end), "</think>");
  EXPECT_TRUE(vocab->is_stop(*tok.EosId()));
  // Byte-level: ids decode to their bytes.
  for (int32_t id : tok.Encode("Hello world, 123 {\"a\": [1]}", false))
    EXPECT_EQ(vocab->bytes(id), tok.Decode(std::vector<int32_t>{id}));
  // The tool-call vocabulary writes the parser tags as ordinary tokens.
  auto tags = outputs.vocabulary(/*tags_ordinary=*/true);
  EXPECT_FALSE(tags->is_special(*tok.TokenToId("<minimax:tool_call>")));
  EXPECT_TRUE(tags->is_special(*tok.TokenToId("]~b]")));
  EXPECT_EQ(outputs.vocabulary().get(), vocab.get()) << "built once";
}

TEST(StructuredOutputs, CompiledGrammarsAreCachedPerSpec) {
  const tokenizer::Tokenizer tok = TestTokenizer();
  StructuredOutputs outputs(tok, "", /*cache_capacity=*/2);
  const ConstraintSpec a = Parse(R"({"guided_json": {"type": "object", "properties":
      {"x": {"type": "integer"}, "y": {"type": "string"}}}})");
  // The same schema in another spelling compiles to the same grammar.
  const ConstraintSpec a2 = Parse(R"({"response_format": {"type": "json_schema", "json_schema":
      {"name": "n", "schema": {"type": "object", "properties":
      {"x": {"type": "integer"}, "y": {"type": "string"}}}}}})");
  // Property order is part of the grammar: not the same key.
  const ConstraintSpec swapped = Parse(R"({"guided_json": {"type": "object", "properties":
      {"y": {"type": "string"}, "x": {"type": "integer"}}}})");
  EXPECT_NE(a.CacheKey(), swapped.CacheKey());
  auto first = outputs.Compile(a);
  EXPECT_EQ(outputs.cache_stats().misses, 1u);
  EXPECT_EQ(outputs.Compile(a).get(), first.get());
  EXPECT_EQ(outputs.Compile(a2).get(), first.get());
  EXPECT_EQ(outputs.cache_stats().hits, 2u);
  outputs.Compile(swapped);
  outputs.Compile(Parse(R"({"guided_regex": "[0-9]+"})"));  // evicts `a`, the least recent
  EXPECT_EQ(outputs.cache_stats().size, 2u);
  EXPECT_NE(outputs.Compile(a).get(), first.get());
  EXPECT_EQ(outputs.cache_stats().misses, 4u);

  engine::SamplingParams params;
  ApplyConstraint(a, /*reasoning_opened=*/true, outputs, params);
  EXPECT_EQ(params.grammar.get(), outputs.Compile(a).get());
  EXPECT_EQ(params.grammar_start_after, "</think>");
  engine::SamplingParams none;
  ApplyConstraint(ConstraintSpec{}, true, outputs, none);
  EXPECT_EQ(none.grammar, nullptr);
}

std::string CompileError(StructuredOutputs& outputs, const std::string& body) {
  try {
    outputs.Compile(Parse(body));
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.what();
  }
  return "";
}

TEST(StructuredOutputs, UncompilableSpecsAre400WithTheReason) {
  const tokenizer::Tokenizer tok = TestTokenizer();
  StructuredOutputs outputs(tok);
  const std::string keyword =
      CompileError(outputs,
                   R"({"guided_json": {"type": "object", "properties": {"x": {"type": "object",
          "patternProperties": {"a": {}}}}}})");
  EXPECT_NE(keyword.find("patternProperties"), std::string::npos) << keyword;
  EXPECT_NE(keyword.find("$.properties.x"), std::string::npos) << keyword;
  EXPECT_NE(CompileError(outputs, R"({"guided_grammar": "root ::= (\"x\""})"), "");
  EXPECT_NE(CompileError(outputs, R"({"guided_grammar": "start ::= \"x\""})"), "");
  EXPECT_NE(CompileError(outputs, R"({"guided_regex": "(?=a)b"})"), "");
  EXPECT_NE(CompileError(outputs, R"({"guided_regex": "(a"})"), "");
  EXPECT_NE(CompileError(outputs, R"({"guided_json": {"type": "string", "minLength": "x"}})"), "");
}

// Samples uniformly among the tokens the mask allows until a stop token or the grammar's end:
// the bytes of what was sampled.
std::string RandomWalk(const std::shared_ptr<const grammar::CompiledGrammar>& compiled,
                       uint32_t seed, bool& ended) {
  grammar::GrammarMatcher m(compiled);
  const grammar::Vocabulary& vocab = compiled->vocabulary();
  std::vector<uint64_t> mask(grammar::BitmaskWords(vocab.size()));
  std::mt19937 rng(seed);
  std::string text;
  ended = false;
  for (int step = 0; step < 200 && !m.MustTerminate(); ++step) {
    std::fill(mask.begin(), mask.end(), 0);
    m.FillNextTokenMask(mask);
    std::vector<int32_t> allowed;
    for (size_t id = 0; id < vocab.size(); ++id)
      if (grammar::BitmaskTest(mask, static_cast<int32_t>(id))) allowed.push_back(int32_t(id));
    EXPECT_FALSE(allowed.empty());
    if (allowed.empty()) break;
    const int32_t t = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    EXPECT_TRUE(m.AcceptToken(t));
    if (vocab.is_stop(t)) break;
    text += vocab.bytes(t);
  }
  ended = m.CanTerminate();
  return text;
}

// The masks on the real vocabulary only ever lead to strings of the language (every token of
// the model, multi-byte and partial UTF-8 ones included).
TEST(StructuredOutputs, RandomWalksOnTheModelVocabularyStayInTheLanguage) {
  const tokenizer::Tokenizer tok = TestTokenizer();
  StructuredOutputs outputs(tok);
  for (const char* re :
       {R"([^,\n]{1,10}(,[^,\n]{1,10}){0,3})", R"([a-z]{2,8}@[a-z]{2,6}\.(com|org))",
        R"((\d{1,3}\.){3}\d{1,3})", R"([\x{4e00}-\x{9fff}]{1,4})"}) {
    auto compiled = outputs.Compile(ParseConstraint(Json{{"guided_regex", re}}));
    const grammar::testing::Pcre pcre(re, /*flags=*/0);
    for (uint32_t seed = 0; seed < 40; ++seed) {
      bool ended = false;
      const std::string s = RandomWalk(compiled, seed, ended);
      if (ended) {
        EXPECT_TRUE(pcre.FullMatch(s)) << re << ": " << s;
      }
    }
  }
  auto json = outputs.Compile(Parse(R"({"guided_json": {"type": "object", "properties": {
      "a": {"type": "string", "maxLength": 5}, "b": {"type": "integer", "minimum": -3, "maximum": 40},
      "c": {"type": "array", "items": {"type": "boolean"}, "maxItems": 2}},
      "required": ["a", "b", "c"]}})"));
  for (uint32_t seed = 0; seed < 40; ++seed) {
    bool ended = false;
    const std::string s = RandomWalk(json, seed, ended);
    if (!ended) continue;
    const Json v = Json::parse(s, nullptr, false);
    ASSERT_TRUE(v.is_object()) << s;
    EXPECT_LE(v["a"].get<std::string>().size(), 20u) << s;
    EXPECT_GE(v["b"].get<int>(), -3) << s;
    EXPECT_LE(v["b"].get<int>(), 40) << s;
  }
}

// --- Tool-call grammars ---

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string", "maxLength": 20},
                   "days": {"type": "integer", "minimum": 1, "maximum": 7},
                   "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                   "when": {"type": "string", "format": "date"},
                   "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                   "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
    "required": ["city", "days"]}}},
  {"type": "function", "function": {"name": "noop"}}
])";

bool Accepts(const grammar::GrammarAst& ast, const std::string& s) {
  grammar::EarleyParser p(grammar::Grammar::Compile(ast));
  for (char c : s)
    if (!p.Advance(static_cast<uint8_t>(c))) return false;
  return p.CanFinish();
}

ToolCallConstraint MiniMax(bool single = false, std::string only = "") {
  return {.tools = Json::parse(kTools),
          .format = chat::ToolCallFormat::kMiniMaxXml,
          .only_function = std::move(only),
          .single_call = single};
}

TEST(ToolCallGrammar, MiniMaxAcceptsTypedCallsTheParserReadsBack) {
  const grammar::GrammarAst ast = ToolCallGrammar(MiniMax());
  const std::string call =
      "<minimax:tool_call>\n<invoke name=\"get_weather\">\n"
      "<parameter name=\"city\">Paris, France</parameter>\n"
      "<parameter name=\"days\">3</parameter>\n"
      "<parameter name=\"unit\">celsius</parameter>\n"
      "<parameter name=\"when\">2024-05-17</parameter>\n"
      "<parameter name=\"note\">null</parameter>\n"
      "<parameter name=\"tags\">[\"a\", \"b\"]</parameter>\n"
      "</invoke>\n<invoke name=\"noop\">\n</invoke>\n</minimax:tool_call>";
  ASSERT_TRUE(Accepts(ast, call));
  chat::ParserOptions o{.tools = chat::ToolCallFormat::kMiniMaxXml,
                        .tools_schema = Json::parse(kTools)};
  const chat::ParsedReply reply = chat::ParseReply(o, call);
  ASSERT_EQ(reply.tool_calls.size(), 2u);
  EXPECT_EQ(Json::parse(reply.tool_calls[0].arguments),
            Json::parse(R"({"city": "Paris, France", "days": 3, "unit": "celsius",
                "when": "2024-05-17", "note": null, "tags": ["a", "b"]})"));
  EXPECT_EQ(reply.tool_calls[1].arguments, "{}");
  EXPECT_EQ(reply.content, "");

  const std::string head = "<minimax:tool_call>\n<invoke name=\"get_weather\">\n";
  const std::string days = "<parameter name=\"days\">2</parameter>\n";
  const std::string tail = "</invoke>\n</minimax:tool_call>";
  auto city = [](const std::string& v) {
    return "<parameter name=\"city\">" + v + "</parameter>\n";
  };
  EXPECT_TRUE(Accepts(ast, head + city("Rome") + days + tail));
  EXPECT_FALSE(Accepts(ast, head + days + tail)) << "required city missing";
  EXPECT_FALSE(Accepts(ast, head + days + city("Rome") + tail)) << "order as written";
  EXPECT_FALSE(Accepts(ast, head + city("NULL") + days + tail)) << "the parser reads null";
  EXPECT_TRUE(Accepts(ast, head + city("Nullville") + days + tail));
  EXPECT_TRUE(Accepts(ast, head + city("nul") + days + tail));
  EXPECT_FALSE(Accepts(ast, head + city("a<b") + days + tail));
  EXPECT_FALSE(Accepts(ast, head + city("two\nlines") + days + tail));
  EXPECT_FALSE(Accepts(ast, head + city(std::string(21, 'x')) + days + tail)) << "maxLength";
  EXPECT_FALSE(
      Accepts(ast, head + city("Rome") + "<parameter name=\"days\">9</parameter>\n" + tail))
      << "maximum";
  EXPECT_FALSE(
      Accepts(ast, head + city("Rome") + "<parameter name=\"days\">two</parameter>\n" + tail));
  EXPECT_FALSE(Accepts(ast, "Sure! " + head + city("Rome") + days + tail)) << "calls only";
  EXPECT_FALSE(Accepts(ast, "<minimax:tool_call>\n</minimax:tool_call>")) << "at least one call";
  EXPECT_FALSE(Accepts(ast, "<minimax:tool_call>\n<invoke name=\"other\">\n" + tail));

  const grammar::GrammarAst single = ToolCallGrammar(MiniMax(/*single=*/true));
  const std::string noop = "<invoke name=\"noop\">\n</invoke>\n";
  EXPECT_TRUE(Accepts(single, "<minimax:tool_call>\n" + noop + "</minimax:tool_call>"));
  EXPECT_FALSE(Accepts(single, "<minimax:tool_call>\n" + noop + noop + "</minimax:tool_call>"));
  const grammar::GrammarAst named = ToolCallGrammar(MiniMax(true, "noop"));
  EXPECT_TRUE(Accepts(named, "<minimax:tool_call>\n" + noop + "</minimax:tool_call>"));
  EXPECT_FALSE(Accepts(named, head + city("Rome") + days + tail));
}

TEST(ToolCallGrammar, Qwen3JsonCalls) {
  ToolCallConstraint c = MiniMax();
  c.format = chat::ToolCallFormat::kQwen3Json;
  const grammar::GrammarAst ast = ToolCallGrammar(c);
  const std::string call =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": "
      "2}}\n</tool_call>";
  const std::string noop = "<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>";
  ASSERT_TRUE(Accepts(ast, call));
  EXPECT_TRUE(Accepts(ast, call + "\n" + noop));
  EXPECT_FALSE(Accepts(ast,
                       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                       "{\"days\": 2}}\n</tool_call>"));
  chat::ParserOptions o;
  o.tools = chat::ToolCallFormat::kQwen3Json;
  const chat::ParsedReply reply = chat::ParseReply(o, call + "\n" + noop);
  ASSERT_EQ(reply.tool_calls.size(), 2u);
  EXPECT_EQ(Json::parse(reply.tool_calls[0].arguments)["city"], "Oslo");
  c.single_call = true;
  EXPECT_FALSE(Accepts(ToolCallGrammar(c), call + "\n" + noop));
}

TEST(ToolCallGrammar, UnsupportedSchemasNameTheTool) {
  ToolCallConstraint c = MiniMax();
  c.tools = Json::parse(R"([{"type": "function", "function": {"name": "f", "parameters":
      {"type": "object", "properties": {"x": {"type": "string", "not": {"const": "a"}}}}}}])");
  try {
    ToolCallGrammar(c);
    FAIL() << "accepted 'not'";
  } catch (const grammar::GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("tool 'f'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'not'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moeserve::server
