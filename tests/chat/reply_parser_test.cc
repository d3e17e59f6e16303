// Reasoning / tool-call parsing of model replies, whole and streamed: every reply is also fed
// split at every byte offset and in random chunks, and the merged deltas must equal the whole
// parse.
#include "chat/reply_parser.h"

#include <gtest/gtest.h>

#include <random>

namespace moeserve::chat {
namespace {

using ojson = nlohmann::ordered_json;

const ojson& Tools() {
  static const ojson tools = ojson::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                     "temp": {"type": "number"}, "metric": {"type": "boolean"},
                     "opts": {"type": "object"}, "tags": {"type": "array"},
                     "note": {"type": ["string", "null"]}}}}},
    {"type": "function", "function": {"name": "run_code", "parameters": {"type": "object",
      "properties": {"code": {"type": "string"}}}}}])");
  return tools;
}

ParserOptions MiniMax(bool opened = true) {
  ParserOptions o;
  o.reasoning = ReasoningFormat::kThinkTags;
  o.tools = ToolCallFormat::kMiniMaxXml;
  o.prompt_opened_think = opened;
  o.tools_schema = Tools();
  return o;
}

ParserOptions Qwen() {
  ParserOptions o;
  o.reasoning = ReasoningFormat::kThinkTags;
  o.tools = ToolCallFormat::kQwen3Json;
  o.tools_schema = Tools();
  return o;
}

bool Same(const ParsedReply& a, const ParsedReply& b) {
  if (a.reasoning_content != b.reasoning_content || a.content != b.content) return false;
  if (a.tool_calls.size() != b.tool_calls.size()) return false;
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    if (a.tool_calls[i].id != b.tool_calls[i].id || a.tool_calls[i].name != b.tool_calls[i].name ||
        a.tool_calls[i].arguments != b.tool_calls[i].arguments) {
      return false;
    }
  }
  return true;
}

// Streams `chunks`, checks the per-delta contract, returns the merged reply.
ParsedReply Stream(const ParserOptions& o, const std::vector<std::string>& chunks) {
  ReplyParser p(o);
  ParsedReply merged;
  std::vector<int> name_seen;  // per index: deltas with a name
  auto ends_with_tag_prefix = [](std::string_view text, std::string_view tag) {
    for (size_t k = 1; k < tag.size() && k <= text.size(); ++k) {
      if (text.substr(text.size() - k) == tag.substr(0, k)) return true;
    }
    return false;
  };
  auto check = [&](const ParsedDelta& d, bool final) {
    if (!final) {
      // Text that could still become a tag is held back until the next delta decides.
      if (o.tools != ToolCallFormat::kNone) {
        std::string_view tag =
            o.tools == ToolCallFormat::kMiniMaxXml ? "<minimax:tool_call>" : "<tool_call>";
        EXPECT_FALSE(ends_with_tag_prefix(d.content, tag)) << "content delta: " << d.content;
      }
      EXPECT_FALSE(ends_with_tag_prefix(d.reasoning_content, "</think>")) << d.reasoning_content;
    }
    for (const ToolCallDelta& t : d.tool_calls) {
      if (t.index >= static_cast<int>(name_seen.size())) name_seen.resize(t.index + 1, 0);
      if (!t.name.empty()) {
        EXPECT_EQ(name_seen[t.index], 0) << "tool call " << t.index << " named twice";
        EXPECT_FALSE(t.id.empty());
        EXPECT_TRUE(t.arguments.empty());
        ++name_seen[t.index];
      } else {
        EXPECT_EQ(name_seen[t.index], 1) << "arguments before the name";
        EXPECT_TRUE(t.id.empty());
      }
    }
    AccumulateDelta(d, merged);
  };
  for (const auto& c : chunks) check(p.Push(c), false);
  check(p.Finish(), true);
  return merged;
}

void ExpectSplitInvariant(const ParserOptions& o, const std::string& text) {
  ParsedReply whole = ParseReply(o, text);
  for (size_t i = 0; i <= text.size(); ++i) {
    ParsedReply s = Stream(o, {text.substr(0, i), text.substr(i)});
    ASSERT_TRUE(Same(s, whole)) << "split at " << i << " of: " << text;
  }
  // Byte by byte, and random chunkings.
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  ASSERT_TRUE(Same(Stream(o, bytes), whole)) << "byte-by-byte: " << text;
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<std::string> chunks;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t n = std::uniform_int_distribution<size_t>(0, 12)(rng);
      chunks.push_back(text.substr(pos, n));
      pos += n;
    }
    ASSERT_TRUE(Same(Stream(o, chunks), whole)) << "random chunks: " << text;
  }
}

TEST(ReplyParser, MiniMaxM2ReasoningThenContent) {
  ParsedReply r = ParseReply(MiniMax(), "Let me think.\nStep 2.\n</think>\n\nThe answer is 4.");
  EXPECT_EQ(r.reasoning_content, "Let me think.\nStep 2.");
  EXPECT_EQ(r.content, "The answer is 4.");
  EXPECT_TRUE(r.tool_calls.empty());
}

TEST(ReplyParser, ReasoningWithoutCloseIsReasoningWhenPromptOpened) {
  ParsedReply r = ParseReply(MiniMax(true), "still thinking");
  EXPECT_EQ(r.reasoning_content, "still thinking");
  EXPECT_EQ(r.content, "");
}

TEST(ReplyParser, ModelOpenedThink) {
  // M2.5 / Qwen3: the model writes <think> itself.
  ParsedReply r = ParseReply(MiniMax(false), "<think>\nhmm\n</think>\n\nHi!");
  EXPECT_EQ(r.reasoning_content, "hmm");
  EXPECT_EQ(r.content, "Hi!");
  // No <think> and the prompt did not open one: all content, never reasoning-only.
  r = ParseReply(MiniMax(false), "Just an answer.");
  EXPECT_EQ(r.reasoning_content, "");
  EXPECT_EQ(r.content, "Just an answer.");
  // A duplicated <think> after an opened prompt is dropped.
  r = ParseReply(MiniMax(true), "<think>x</think>y");
  EXPECT_EQ(r.reasoning_content, "x");
  EXPECT_EQ(r.content, "y");
}

TEST(ReplyParser, MiniMaxToolCallsTypedBySchema) {
  std::string text =
      "I'll check.</think>\n\nChecking now.\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n"
      "<parameter name=\"city\">  New York  </parameter>\n<parameter name=\"days\">3</parameter>\n"
      "<parameter name=\"temp\">21.5</parameter>\n<parameter name=\"metric\">true</parameter>\n"
      "<parameter name=\"opts\">{\"a\": [1, {\"b\": null}], \"z\": \"é\"}</parameter>\n"
      "<parameter name=\"tags\">[\"x\", 2]</parameter>\n<parameter name=\"note\">null</parameter>\n"
      "<parameter name=\"extra\">untyped 5</parameter>\n</invoke>\n"
      "<invoke name=\"run_code\">\n<parameter name=\"code\">\nfor i in range(3):\n    print(i)\n\n"
      "</parameter>\n</invoke>\n</minimax:tool_call>";
  ParsedReply r = ParseReply(MiniMax(), text);
  EXPECT_EQ(r.reasoning_content, "I'll check.");
  EXPECT_EQ(r.content, "Checking now.\n");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.tool_calls[0].arguments,
            "{\"city\": \"  New York  \", \"days\": 3, \"temp\": 21.5, \"metric\": true, "
            "\"opts\": {\"a\": [1, {\"b\": null}], \"z\": \"é\"}, \"tags\": [\"x\", 2], "
            "\"note\": null, \"extra\": \"untyped 5\"}");
  EXPECT_EQ(r.tool_calls[1].name, "run_code");
  EXPECT_EQ(r.tool_calls[1].arguments, "{\"code\": \"for i in range(3):\\n    print(i)\\n\"}");
  EXPECT_NE(r.tool_calls[0].id, r.tool_calls[1].id);
  ojson oa = r.tool_calls[0].ToOpenAI();
  EXPECT_EQ(oa["type"], "function");
  EXPECT_EQ(oa["function"]["name"], "get_weather");
  ExpectSplitInvariant(MiniMax(), text);
}

TEST(ReplyParser, FailedTypedParseKeepsString) {
  ParsedReply r = ParseReply(
      MiniMax(),
      "</think><minimax:tool_call><invoke name=\"get_weather\"><parameter name=\"days\">three"
      "</parameter><parameter name=\"opts\">{broken</parameter><parameter name=\"metric\">"
      "maybe</parameter></invoke></minimax:tool_call>");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments,
            "{\"days\": \"three\", \"opts\": \"{broken\", \"metric\": \"maybe\"}");
}

TEST(ReplyParser, SeveralBlocksAndContentAround) {
  std::string text =
      "r</think>A<minimax:tool_call>\n<invoke name=\"run_code\">\n<parameter "
      "name=\"code\">1</parameter>\n"
      "</invoke>\n</minimax:tool_call>\nB <minimax:tool_call><invoke name='get_weather'>"
      "<parameter name=\"city\">Oslo</parameter></invoke></minimax:tool_call>";
  ParsedReply r = ParseReply(MiniMax(), text);
  EXPECT_EQ(r.content, "AB ");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[1].name, "get_weather");
  EXPECT_EQ(r.tool_calls[1].arguments, "{\"city\": \"Oslo\"}");
  ExpectSplitInvariant(MiniMax(), text);
}

TEST(ReplyParser, UnterminatedCallIsClosedAtFinish) {
  std::string text =
      "</think><minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Ro";
  ParsedReply r = ParseReply(MiniMax(), text);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"city\": \"Ro\"}");
  ExpectSplitInvariant(MiniMax(), text);
}

TEST(ReplyParser, LooksLikeTagsButIsNot) {
  std::string text = "x</think>a < b and <minimax:tool or <thinking> stays";
  ParsedReply r = ParseReply(MiniMax(), text);
  EXPECT_EQ(r.content, text.substr(9));
  ExpectSplitInvariant(MiniMax(), text);
}

TEST(ReplyParser, Qwen3ToolCalls) {
  std::string text =
      "<think>\nNeed weather.\n</think>\n\nSure.\n<tool_call>\n{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n<tool_call>\n"
      "{\"name\": \"run_code\", \"arguments\": {\"code\": \"x = 1\"}}\n</tool_call>";
  ParsedReply r = ParseReply(Qwen(), text);
  EXPECT_EQ(r.reasoning_content, "Need weather.");
  EXPECT_EQ(r.content, "Sure.\n");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"city\": \"Paris\", \"days\": 2}");
  EXPECT_EQ(r.tool_calls[1].name, "run_code");
  ExpectSplitInvariant(Qwen(), text);
  // Invalid JSON stays content.
  r = ParseReply(Qwen(), "<tool_call>not json</tool_call>");
  EXPECT_EQ(r.content, "<tool_call>not json</tool_call>");
  EXPECT_TRUE(r.tool_calls.empty());
}

TEST(ReplyParser, NoReasoningFormat) {
  ParserOptions o;
  o.tools = ToolCallFormat::kQwen3Json;
  std::string text = "<think>kept</think> text";
  EXPECT_EQ(ParseReply(o, text).content, text);
  ExpectSplitInvariant(o, text);
}

TEST(ReplyParser, AllRepliesAreSplitInvariant) {
  for (const char* t :
       {"", "</think>", "<think>", "  <think>  a  </think>  b  ", "abc</think",
        "a</think>b<minimax:tool_call>", "<minimax:tool_call><invoke name=\"x\">",
        "</think><minimax:tool_call>junk<invoke name=\"x\">junk<parameter name=\"y\">"
        "v</parameter>junk</invoke>junk</minimax:tool_call>tail",
        "t</think>\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n</invoke>\n"
        "</minimax:tool_call>\n"}) {
    ExpectSplitInvariant(MiniMax(true), t);
    ExpectSplitInvariant(MiniMax(false), t);
    ExpectSplitInvariant(Qwen(), t);
  }
}

TEST(ReplyParser, PromptOpensThink) {
  EXPECT_TRUE(PromptOpensThink("]~b]ai\n<think>\n"));
  EXPECT_TRUE(PromptOpensThink("<think>"));
  EXPECT_FALSE(PromptOpensThink("<|im_start|>assistant\n"));
  EXPECT_FALSE(PromptOpensThink("<think>\n\n</think>\n\n"));
}

TEST(ReplyParser, IdsDependOnSeed) {
  std::string text = "</think><minimax:tool_call><invoke name=\"x\"></invoke></minimax:tool_call>";
  ParserOptions a = MiniMax(), b = MiniMax();
  b.call_id_seed = 42;
  EXPECT_NE(ParseReply(a, text).tool_calls[0].id, ParseReply(b, text).tool_calls[0].id);
  EXPECT_EQ(ParseReply(a, text).tool_calls[0].id.rfind("call_", 0), 0u);
}

}  // namespace
}  // namespace moeserve::chat
