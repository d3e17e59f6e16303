// libFuzzer target: Parse + Render of arbitrary templates with a fixed chat context, then the
// reply parser on the same bytes. Anything but a clean moeserve::Error (crash, hang, sanitizer
// report, other exception) is a finding. Build and run with fuzz/chat/run.sh.
#include <cstddef>
#include <cstdint>
#include <string>

#include "chat/chat_template.h"
#include "chat/reply_parser.h"
#include "core/check.h"

namespace {

const nlohmann::ordered_json& Context() {
  static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
                 {"role": "assistant", "content": "", "reasoning_content": "r",
                  "tool_calls": [{"id": "c", "type": "function",
                                  "function": {"name": "f", "arguments": {"a": [1, 2.5, null]}}}]},
                 {"role": "tool", "content": "out"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
               "properties": {"a": {"type": "array"}, "n": {"type": "integer"}}}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})");
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  std::string src(reinterpret_cast<const char*>(data), size);
  try {
    moeserve::chat::ChatTemplate t = moeserve::chat::ChatTemplate::Parse(src);
    t.Render(Context());
  } catch (const moeserve::Error&) {
  }
  moeserve::chat::ParserOptions o;
  o.reasoning = moeserve::chat::ReasoningFormat::kThinkTags;
  o.tools = size % 2 ? moeserve::chat::ToolCallFormat::kMiniMaxXml
                     : moeserve::chat::ToolCallFormat::kQwen3Json;
  o.prompt_opened_think = size % 3 == 0;
  o.tools_schema = Context()["tools"];
  moeserve::chat::ParsedReply whole = moeserve::chat::ParseReply(o, src);
  // Split invariance at one input-dependent point.
  moeserve::chat::ReplyParser p(o);
  moeserve::chat::ParsedReply streamed;
  size_t cut = size ? data[0] % (size + 1) : 0;
  moeserve::chat::AccumulateDelta(p.Push(src.substr(0, cut)), streamed);
  moeserve::chat::AccumulateDelta(p.Push(src.substr(cut)), streamed);
  moeserve::chat::AccumulateDelta(p.Finish(), streamed);
  if (streamed.content != whole.content || streamed.reasoning_content != whole.reasoning_content ||
      streamed.tool_calls.size() != whole.tool_calls.size()) {
    __builtin_trap();
  }
  return 0;
}
