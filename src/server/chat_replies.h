// The reply side of a chat generation, shared by every chat route (OpenAI chat completions,
// Anthropic Messages, OpenAI Responses): one ReplyParser per choice splits the text into
// reasoning, content and tool calls; calls to functions a named tool_choice excludes, and calls
// after the first with parallel_tool_calls false, are dropped and the rest renumbered from 0; whole
// replies are accumulated for non-streamed responses.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "chat/reply_parser.h"
#include "server/chat_prompt.h"
#include "server/chat_request.h"
#include "server/generation.h"

namespace moeserve::server {

class ChatReplies {
 public:
  struct Choice {
    chat::ParsedReply reply;  // everything pushed so far
    int num_calls = 0;        // tool calls returned (after filtering)
    bool finished = false;
    ChoiceUpdate last;  // the finishing update (finish_reason, stop_reason), text moved out
  };

  ChatReplies(const ServingContext& ctx, const ChatRequest& request, const std::string& prompt,
              size_t num_choices);

  // Feeds an update's text to its choice's parser (and flushes the parser when the choice
  // finished); returns what the update adds, tool calls renumbered, and accumulates it.
  chat::ParsedDelta Push(ChoiceUpdate& u);

  const Choice& choice(size_t i) const { return choices_[i]; }
  size_t num_choices() const { return choices_.size(); }
  // "tool_calls" when a reply that ended "stop" made calls, else the engine's finish reason.
  std::string FinishReason(size_t i) const;
  // Whether a reasoning parser runs (responses then carry a reasoning field, null when empty).
  bool reasoning_enabled() const { return options_.reasoning != chat::ReasoningFormat::kNone; }

 private:
  void FilterCalls(Choice& c, std::vector<chat::ToolCallDelta>& calls);

  chat::ParserOptions options_;
  std::string only_function_;
  bool first_call_only_ = false;  // parallel_tool_calls false
  std::vector<Choice> choices_;
  std::vector<std::unique_ptr<chat::ReplyParser>> parsers_;
  std::vector<std::map<int, int>> call_index_;  // per choice: parser index -> output, -1 dropped
};

// A started chat generation.
struct ChatRun {
  ChatPrompt prompt;
  std::unique_ptr<Generation> gen;
  std::shared_ptr<ChatReplies> replies;
};

// Renders the request's prompt (chat_prompt.h), starts its generation and its reply parsers.
ChatRun StartChat(ServingContext& ctx, ChatRequest& request);

}  // namespace moeserve::server
