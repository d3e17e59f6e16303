// Parsers by vLLM's names: every name the CLI offers resolves to the format that reads it, and
// the formats added for those names (Qwen3-Coder XML in <tool_call>, minimax_m2_append_think)
// parse whole and streamed alike, split at every byte.
#include "chat/parser_registry.h"

#include <gtest/gtest.h>

namespace moeserve::chat {
namespace {

using ojson = nlohmann::ordered_json;

const ojson& Tools() {
  static const ojson tools = ojson::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}])");
  return tools;
}

ParserOptions Options(std::string_view reasoning, std::string_view tools) {
  const ReasoningParserInfo* r = FindReasoningParser(reasoning);
  const ToolCallParserInfo* t = FindToolCallParser(tools);
  EXPECT_NE(r, nullptr) << reasoning;
  EXPECT_NE(t, nullptr) << tools;
  ParserOptions o;
  o.reasoning = r ? r->format : ReasoningFormat::kNone;
  o.tools = t ? t->format : ToolCallFormat::kNone;
  o.tools_schema = Tools();
  return o;
}

// The whole parse, after checking that every two-piece split streams to the same reply.
ParsedReply ParseEverySplit(const ParserOptions& o, const std::string& text) {
  const ParsedReply whole = ParseReply(o, text);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    ReplyParser p(o);
    ParsedReply merged;
    AccumulateDelta(p.Push(text.substr(0, cut)), merged);
    AccumulateDelta(p.Push(text.substr(cut)), merged);
    AccumulateDelta(p.Finish(), merged);
    EXPECT_EQ(merged.content, whole.content) << "cut at " << cut;
    EXPECT_EQ(merged.reasoning_content, whole.reasoning_content) << "cut at " << cut;
    EXPECT_EQ(merged.tool_calls.size(), whole.tool_calls.size()) << "cut at " << cut;
    for (size_t i = 0; i < merged.tool_calls.size() && i < whole.tool_calls.size(); ++i)
      EXPECT_EQ(merged.tool_calls[i].arguments, whole.tool_calls[i].arguments) << "cut " << cut;
  }
  return whole;
}

TEST(ParserRegistry, HasVllmNames) {
  for (const char* name : {"minimax_m2", "minimax_m2_append_think", "qwen3", "deepseek_r1", "none"})
    EXPECT_NE(FindReasoningParser(name), nullptr) << name;
  for (const char* name : {"minimax_m2", "hermes", "qwen3_coder", "qwen3_xml", "none"})
    EXPECT_NE(FindToolCallParser(name), nullptr) << name;
  EXPECT_EQ(FindToolCallParser("nonesuch"), nullptr);
  EXPECT_EQ(FindToolCallParser("minimax_m2")->format, ToolCallFormat::kMiniMaxXml);
  EXPECT_EQ(FindReasoningParser("none")->format, ReasoningFormat::kNone);
  EXPECT_NE(DescribeToolCallParsers().find("hermes: "), std::string::npos);
}

// `--tool-call-parser hermes` used to be accepted and turn parsing off.
TEST(ParserRegistry, HermesReadsJsonToolCalls) {
  const ParsedReply r = ParseEverySplit(
      Options("none", "hermes"),
      "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"
      "\n</tool_call>");
  EXPECT_EQ(r.content, "Checking.\n");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"city": "Paris"})");
}

TEST(ParserRegistry, Qwen3CoderReadsXmlFunctions) {
  const ParsedReply r = ParseEverySplit(
      Options("qwen3", "qwen3_coder"),
      "<think>\nweather\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\n"
      "New York\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>\n"
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</function>\n</tool_call>");
  EXPECT_EQ(r.reasoning_content, "weather");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"city": "New York", "days": 3})");
  EXPECT_EQ(r.tool_calls[1].arguments, R"({"city": "Rome"})");  // unclosed parameter
}

TEST(ParserRegistry, AppendThinkKeepsThinkingInContent) {
  const ParsedReply r =
      ParseEverySplit(Options("minimax_m2_append_think", "minimax_m2"), "Sum.\n</think>\n\n4");
  EXPECT_EQ(r.reasoning_content, "");
  EXPECT_EQ(r.content, "<think>Sum.\n</think>\n\n4");
  EXPECT_EQ(ParseReply(Options("minimax_m2_append_think", "none"), "").content, "<think>");
}

}  // namespace
}  // namespace moeserve::chat
