#include "chat/parser_registry.h"

namespace moeserve::chat {

const std::vector<ReasoningParserInfo>& ReasoningParsers() {
  static const std::vector<ReasoningParserInfo> parsers = {
      {"minimax_m2", ReasoningFormat::kThinkTags,
       "MiniMax-M2/M2.5: text before </think> is reasoning (the prompt opens <think>)"},
      {"minimax_m2_append_think", ReasoningFormat::kAppendThink,
       "MiniMax-M2 for clients that keep the thinking in the content: content = \"<think>\" + "
       "the reply, no reasoning field"},
      {"qwen3", ReasoningFormat::kThinkTags, "Qwen3: <think>...</think> before the answer"},
      {"deepseek_r1", ReasoningFormat::kThinkTags,
       "DeepSeek-R1 style: text up to </think> is reasoning, <think> optional"},
      {"none", ReasoningFormat::kNone, "no reasoning parsing: everything is content"},
  };
  return parsers;
}

const std::vector<ToolCallParserInfo>& ToolCallParsers() {
  static const std::vector<ToolCallParserInfo> parsers = {
      {"minimax_m2", ToolCallFormat::kMiniMaxXml,
       "<minimax:tool_call><invoke name=..><parameter name=..>v</parameter></invoke>..., "
       "values typed by the tool's JSON schema"},
      {"hermes", ToolCallFormat::kQwen3Json,
       "<tool_call>{\"name\": .., \"arguments\": {..}}</tool_call> (Hermes, Qwen2.5/Qwen3)"},
      {"qwen3_coder", ToolCallFormat::kQwen3Json,
       "<tool_call><function=f><parameter=k>v</parameter></function></tool_call> "
       "(Qwen3-Coder; JSON bodies are read too)"},
      {"qwen3_xml", ToolCallFormat::kQwen3Json, "the same format as qwen3_coder"},
      {"none", ToolCallFormat::kNone, "no tool-call parsing: tool calls stay in the content"},
  };
  return parsers;
}

const ReasoningParserInfo* FindReasoningParser(std::string_view name) {
  for (const auto& p : ReasoningParsers())
    if (p.name == name) return &p;
  return nullptr;
}

const ToolCallParserInfo* FindToolCallParser(std::string_view name) {
  for (const auto& p : ToolCallParsers())
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<std::string> ReasoningParserNames() {
  std::vector<std::string> names;
  for (const auto& p : ReasoningParsers()) names.push_back(p.name);
  return names;
}

std::vector<std::string> ToolCallParserNames() {
  std::vector<std::string> names;
  for (const auto& p : ToolCallParsers()) names.push_back(p.name);
  return names;
}

std::string DescribeReasoningParsers() {
  std::string s;
  for (const auto& p : ReasoningParsers()) s += "\n  " + p.name + ": " + p.description;
  return s;
}

std::string DescribeToolCallParsers() {
  std::string s;
  for (const auto& p : ToolCallParsers()) s += "\n  " + p.name + ": " + p.description;
  return s;
}

}  // namespace moeserve::chat
