#include "server/chat_replies.h"

#include <set>

namespace moeserve::server {
namespace {

// Special tokens the reply parsers read; detokenized even with skip_special_tokens.
std::set<int32_t> ParserTokenIds(const ServingContext& ctx) {
  std::set<int32_t> ids;
  for (const char* tag : {"<think>", "</think>", "<minimax:tool_call>", "</minimax:tool_call>",
                          "<tool_call>", "</tool_call>"})
    if (auto id = ctx.tokenizer.TokenToId(tag)) ids.insert(*id);
  return ids;
}

}  // namespace

ChatReplies::ChatReplies(const ServingContext& ctx, const ChatRequest& request,
                         const std::string& prompt, size_t num_choices)
    : choices_(num_choices), call_index_(num_choices) {
  options_.reasoning = ctx.config.reasoning;
  options_.tools = request.parse_tool_calls ? ctx.config.tool_calls : chat::ToolCallFormat::kNone;
  options_.prompt_opened_think =
      options_.reasoning != chat::ReasoningFormat::kNone && chat::PromptOpensThink(prompt);
  options_.tools_schema = request.tools;
  if (request.tool_choice.mode == ToolChoice::Mode::kNamed)
    only_function_ = request.tool_choice.function;
  first_call_only_ = !request.parallel_tool_calls;
  const uint64_t seed_base = ctx.next_request_id.load() * 1000003u;
  for (size_t i = 0; i < num_choices; ++i) {
    chat::ParserOptions o = options_;
    o.call_id_seed = seed_base + i;
    parsers_.push_back(std::make_unique<chat::ReplyParser>(o));
  }
}

chat::ParsedDelta ChatReplies::Push(ChoiceUpdate& u) {
  Choice& c = choices_[u.choice];
  chat::ReplyParser& parser = *parsers_[u.choice];
  chat::ParsedDelta d = parser.Push(u.text);
  if (u.finished) {
    chat::ParsedDelta tail = parser.Finish();
    d.reasoning_content += tail.reasoning_content;
    d.content += tail.content;
    for (auto& t : tail.tool_calls) d.tool_calls.push_back(std::move(t));
    c.finished = true;
    c.last = u;
    c.last.text.clear();
  }
  FilterCalls(c, d.tool_calls);
  chat::AccumulateDelta(d, c.reply);
  return d;
}

std::string ChatReplies::FinishReason(size_t i) const {
  const Choice& c = choices_[i];
  return c.num_calls > 0 && c.last.finish_reason == "stop" ? std::string("tool_calls")
                                                           : c.last.finish_reason;
}

// Drops calls to functions other than the named one, renumbering the rest.
void ChatReplies::FilterCalls(Choice& c, std::vector<chat::ToolCallDelta>& calls) {
  std::map<int, int>& index = call_index_[&c - choices_.data()];
  std::vector<chat::ToolCallDelta> kept;
  for (auto& d : calls) {
    auto it = index.find(d.index);
    if (it == index.end()) {
      const bool keep = (only_function_.empty() || d.name == only_function_) &&
                        !(first_call_only_ && c.num_calls > 0);
      it = index.emplace(d.index, keep ? c.num_calls++ : -1).first;
    }
    if (it->second < 0) continue;
    d.index = it->second;
    kept.push_back(std::move(d));
  }
  calls = std::move(kept);
}

ChatRun StartChat(ServingContext& ctx, ChatRequest& request) {
  ChatRun run;
  run.prompt = RenderChatPrompt(request, ctx);
  // The constraint starts after the reasoning when the prompt left a reasoning block open.
  ApplyConstraint(request.constraint,
                  ctx.config.reasoning != chat::ReasoningFormat::kNone &&
                      chat::PromptOpensThink(run.prompt.text),
                  ctx.structured_outputs, request.sampling.params);
  request.sampling.text.keep_token_ids = ParserTokenIds(ctx);
  run.gen = std::make_unique<Generation>(ctx);
  run.gen->Start({run.prompt.ids}, request.sampling.params, request.sampling.text);
  run.replies =
      std::make_shared<ChatReplies>(ctx, request, run.prompt.text, run.gen->num_choices());
  return run;
}

}  // namespace moeserve::server
