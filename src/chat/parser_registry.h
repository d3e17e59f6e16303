// Reasoning and tool-call parsers by vLLM's names (--reasoning-parser, --tool-call-parser): each
// name maps to the format ReplyParser reads. The CLI's choices and help text come from these
// tables, so a parser is added here, in one place, once ReplyParser reads its format.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/reply_parser.h"

namespace moeserve::chat {

struct ReasoningParserInfo {
  std::string name;  // vLLM's name, e.g. "deepseek_r1"
  ReasoningFormat format;
  std::string description;
};

struct ToolCallParserInfo {
  std::string name;  // vLLM's name, e.g. "hermes"
  ToolCallFormat format;
  std::string description;
};

// Every known parser, "none" (parsing off) last.
const std::vector<ReasoningParserInfo>& ReasoningParsers();
const std::vector<ToolCallParserInfo>& ToolCallParsers();

// nullptr for an unknown name.
const ReasoningParserInfo* FindReasoningParser(std::string_view name);
const ToolCallParserInfo* FindToolCallParser(std::string_view name);

std::vector<std::string> ReasoningParserNames();
std::vector<std::string> ToolCallParserNames();
// "name: description" lines for --help.
std::string DescribeReasoningParsers();
std::string DescribeToolCallParsers();

}  // namespace moeserve::chat
