// Splits a model's reply into OpenAI message fields: reasoning_content, content and tool_calls,
// either all at once (ParseReply) or incrementally as text deltas arrive (ReplyParser).
//
// Reasoning: `<think>...</think>` (MiniMax-M2/M2.5, Qwen3). MiniMax-M2's prompt already opens the
// block (it ends with "<think>\n"), so the reply starts inside it and only emits `</think>`;
// M2.5 and Qwen3 emit `<think>` themselves. Set `prompt_opened_think` (PromptOpensThink(prompt)).
// Text before `</think>` is reasoning; a reply whose prompt did not open a block is reasoning only
// after a leading `<think>`, so such a reply is never reasoning-only by mistake. Whitespace right
// after `<think>`, `</think>` and a tool-call block, and right before `</think>`, is dropped (the
// templates put it back when the message is rendered again).
//
// kAppendThink (vLLM's minimax_m2_append_think) separates nothing: the content is "<think>"
// followed by the reply as written, for clients that keep the thinking in the conversation.
//
// Tool calls (in content only, never inside reasoning):
//  - kMiniMaxXml: <minimax:tool_call>\n<invoke name="f">\n<parameter name="k">v</parameter>\n
//    </invoke>\n</minimax:tool_call>; several invokes per block and several blocks per reply.
//    Values are typed by the tool's JSON schema (`tools` as sent in the request): integer,
//    number, boolean, object/array (JSON) and "null" -> null; a failed typed parse keeps the
//    string; untyped parameters are strings. One leading and one trailing newline of a value are
//    the format's and are dropped; all other whitespace is kept.
//  - kQwen3Json: <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call> (Hermes), or
//    Qwen3-Coder's <tool_call>\n<function=f>\n<parameter=k>\nv\n</parameter>\n</function>\n
//    </tool_call> (values typed as MiniMax's); a block that is neither stays in content as
//    written.
// Arguments are JSON strings with Python json.dumps spacing, keys in the order the model wrote.
//
// Streaming contract (what the server maps to SSE chunks):
//  - a suffix that could still become a tag is held back, so no delta contains half a tag;
//  - each tool call appears once: its first delta has index, id and name (arguments empty), a later
//    delta (often the same Push) has the complete arguments when the call closes;
//  - the concatenation of all deltas equals ParseReply of the whole text, for any split.
// Not thread-safe: one ReplyParser per sequence.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace moeserve::chat {

enum class ReasoningFormat { kNone, kThinkTags, kAppendThink };
enum class ToolCallFormat { kNone, kMiniMaxXml, kQwen3Json };

struct ParserOptions {
  ReasoningFormat reasoning = ReasoningFormat::kNone;
  ToolCallFormat tools = ToolCallFormat::kNone;
  bool prompt_opened_think = false;
  nlohmann::ordered_json tools_schema;  // the request's `tools` (OpenAI shape), or null
  uint64_t call_id_seed = 0;            // tool-call ids are "call_" + hex(hash(seed, index))
};

struct ToolCallDelta {
  int index = 0;
  std::string id;    // set in the call's first delta only
  std::string name;  // set in the call's first delta only
  std::string arguments;
};

struct ParsedDelta {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning_content.empty() && content.empty() && tool_calls.empty(); }
};

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;                    // JSON text
  nlohmann::ordered_json ToOpenAI() const;  // {id, type: "function", function: {name, arguments}}
};

struct ParsedReply {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCall> tool_calls;
};

class ReplyParser {
 public:
  explicit ReplyParser(ParserOptions options);
  ParsedDelta Push(std::string_view text);
  // End of the reply: flushes held-back text and closes unterminated blocks.
  ParsedDelta Finish();

 private:
  enum class State { kThinkStart, kReasoning, kContent, kMiniMaxBlock, kInvoke, kQwenBlock };
  void Process(bool final, ParsedDelta& out);
  bool StepThinkStart(bool final, ParsedDelta& out);
  bool StepReasoning(bool final, ParsedDelta& out);
  bool StepContent(bool final, ParsedDelta& out);
  bool StepMiniMaxBlock(bool final, ParsedDelta& out);
  bool StepInvoke(bool final, ParsedDelta& out);
  bool StepQwenBlock(bool final, ParsedDelta& out);
  // Qwen3-Coder's <function=f><parameter=k>v</parameter></function>; false if `body` is not one.
  bool ParseXmlFunction(const std::string& body, ParsedDelta& out);
  void EmitContent(std::string_view text, ParsedDelta& out);
  void EmitReasoning(std::string_view text, ParsedDelta& out);
  void StartCall(const std::string& name, ParsedDelta& out);
  void FinishCall(const std::string& arguments, ParsedDelta& out);
  void AddParameter(const std::string& name, std::string value);

  ParserOptions options_;
  State state_;
  std::string buffer_;
  bool skip_ws_ = false;  // drop whitespace before the next emitted text
  int next_index_ = 0;
  std::string call_function_;
  nlohmann::ordered_json call_args_;
};

ParsedReply ParseReply(const ParserOptions& options, std::string_view text);
// Merges deltas as a client would (content and reasoning concatenated, tool-call pieces by index).
void AccumulateDelta(const ParsedDelta& delta, ParsedReply& reply);

// True when the rendered prompt ends inside an opened `<think>` block.
bool PromptOpensThink(std::string_view prompt);

// Types a MiniMax <parameter> value by its JSON schema ({"type": ...}, may be null).
nlohmann::ordered_json TypeParameterValue(const std::string& value,
                                          const nlohmann::ordered_json& schema);

}  // namespace moeserve::chat
