// POST /v1/messages and /v1/messages/count_tokens: the Anthropic Messages API on the chat path
// (anthropic_request.h maps the request; ChatReplies splits the reply). The reply becomes content
// blocks in the order the model wrote them: thinking, text, tool_use.
//
// A streamed reply is Anthropic's event sequence, each a named SSE event:
//   message_start (content [], usage so far)
//   per block: content_block_start, content_block_delta... (text_delta | thinking_delta then one
//   signature_delta | input_json_delta), content_block_stop; a ping after the first block start
//   message_delta (stop_reason, stop_sequence, usage.output_tokens), message_stop
// A stream the server gives up on (drain deadline) ends with an `error` event (overloaded_error).
//
// Thinking blocks carry a signature so clients keep and return them: the hex SHA-256 of the
// thinking text (not a secret; nothing checks it on the way back).
#include "server/anthropic_request.h"
#include "server/api_error.h"
#include "server/chat_replies.h"
#include "server/memory_release.h"
#include "server/response_writer.h"
#include "server/routes.h"
#include "server/sha256.h"

namespace moeserve::server {
namespace {

std::string Signature(const std::string& thinking) {
  static const char* kDigits = "0123456789abcdef";
  std::string hex;
  for (uint8_t b : Sha256(thinking)) {
    hex += kDigits[b >> 4];
    hex += kDigits[b & 15];
  }
  return hex;
}

// Anthropic's tool_use ids read "toolu_..."; the parsers make "call_...".
std::string ToolUseId(const std::string& call_id) {
  return call_id.rfind("call_", 0) == 0 ? "toolu_" + call_id.substr(5) : call_id;
}

Json ToolInput(const std::string& arguments) {
  Json input = Json::parse(arguments, nullptr, /*allow_exceptions=*/false);
  return input.is_object() ? input : Json::object();
}

Json Usage(const TokenUsage& u) {
  return {{"input_tokens", u.prompt_tokens - u.cached_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", u.cached_tokens},
          {"output_tokens", u.completion_tokens}};
}

struct StopReason {
  Json reason;    // end_turn, max_tokens, stop_sequence, tool_use (null: aborted)
  Json sequence;  // the stop sequence that matched, or null
};

StopReason StopOf(const ChatReplies& replies) {
  const ChatReplies::Choice& c = replies.choice(0);
  const std::string finish = replies.FinishReason(0);
  if (finish == "tool_calls") return {"tool_use", nullptr};
  if (finish == "length") return {"max_tokens", nullptr};
  if (finish == "stop" && c.last.stop_string) return {"stop_sequence", *c.last.stop_string};
  if (finish == "stop") return {"end_turn", nullptr};
  return {nullptr, nullptr};
}

class AnthropicWriter final : public ResponseWriter {
 public:
  AnthropicWriter(std::string model, std::shared_ptr<ChatReplies> replies)
      : id_(RandomId("msg_")), model_(std::move(model)), replies_(std::move(replies)) {}

  void Absorb(ChoiceUpdate& u) override { replies_->Push(u); }

  Json Body(const Generation& gen) override {
    const chat::ParsedReply& reply = replies_->choice(0).reply;
    Json content = Json::array();
    if (!reply.reasoning_content.empty())
      content.push_back({{"type", "thinking"},
                         {"thinking", reply.reasoning_content},
                         {"signature", Signature(reply.reasoning_content)}});
    if (!reply.content.empty() || (reply.tool_calls.empty() && content.empty()))
      content.push_back({{"type", "text"}, {"text", reply.content}});
    for (const chat::ToolCall& call : reply.tool_calls)
      content.push_back({{"type", "tool_use"},
                         {"id", ToolUseId(call.id)},
                         {"name", call.name},
                         {"input", ToolInput(call.arguments)}});
    const StopReason stop = StopOf(*replies_);
    return {{"id", id_},
            {"type", "message"},
            {"role", "assistant"},
            {"model", model_},
            {"content", std::move(content)},
            {"stop_reason", stop.reason},
            {"stop_sequence", stop.sequence},
            {"usage", Usage(gen.usage())}};
  }

  void Stream(std::vector<ChoiceUpdate>& updates, const Generation& gen,
              std::string& out) override {
    if (!started_) {
      started_ = true;
      Json usage = Usage(gen.usage());
      usage["output_tokens"] = 0;
      Emit(out, "message_start",
           {{"type", "message_start"},
            {"message",
             {{"id", id_},
              {"type", "message"},
              {"role", "assistant"},
              {"model", model_},
              {"content", Json::array()},
              {"stop_reason", nullptr},
              {"stop_sequence", nullptr},
              {"usage", std::move(usage)}}}});
    }
    for (ChoiceUpdate& u : updates) {
      if (finished_) break;
      const chat::ParsedDelta d = replies_->Push(u);
      if (!d.reasoning_content.empty()) {
        if (block_ != Block::kThinking)
          Open(out, Block::kThinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
        Delta(out, {{"type", "thinking_delta"}, {"thinking", d.reasoning_content}});
      }
      if (!d.content.empty()) {
        if (block_ != Block::kText) Open(out, Block::kText, {{"type", "text"}, {"text", ""}});
        Delta(out, {{"type", "text_delta"}, {"text", d.content}});
      }
      for (const chat::ToolCallDelta& t : d.tool_calls) {
        if (block_ != Block::kToolUse || t.index != tool_index_) {
          tool_index_ = t.index;
          Open(out, Block::kToolUse,
               {{"type", "tool_use"},
                {"id", ToolUseId(t.id)},
                {"name", t.name},
                {"input", Json::object()}});
        }
        if (!t.arguments.empty())
          Delta(out, {{"type", "input_json_delta"}, {"partial_json", t.arguments}});
      }
      if (u.finished) Finish(out, gen, u.finish_reason == "abort");
    }
  }

  void StreamEnd(const Generation& gen, std::string& out) override {
    if (!finished_) Finish(out, gen, /*aborted=*/true);
  }

 private:
  enum class Block { kNone, kThinking, kText, kToolUse };

  static void Emit(std::string& out, const char* event, const Json& data) {
    out += NamedSseEvent(event, data);
  }

  void Open(std::string& out, Block kind, Json content_block) {
    Close(out);
    block_ = kind;
    Emit(out, "content_block_start",
         {{"type", "content_block_start"},
          {"index", index_},
          {"content_block", std::move(content_block)}});
    if (!pinged_) {
      pinged_ = true;
      Emit(out, "ping", {{"type", "ping"}});
    }
  }

  void Delta(std::string& out, Json delta) {
    if (block_ == Block::kThinking) thinking_ += delta.value("thinking", "");
    Emit(out, "content_block_delta",
         {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(delta)}});
  }

  void Close(std::string& out) {
    if (block_ == Block::kNone) return;
    if (block_ == Block::kThinking) {
      Emit(out, "content_block_delta",
           {{"type", "content_block_delta"},
            {"index", index_},
            {"delta", {{"type", "signature_delta"}, {"signature", Signature(thinking_)}}}});
      thinking_.clear();
    }
    Emit(out, "content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
    block_ = Block::kNone;
    ++index_;
  }

  void Finish(std::string& out, const Generation& gen, bool aborted) {
    finished_ = true;
    if (aborted) {
      Emit(out, "error",
           {{"type", "error"},
            {"error",
             {{"type", "overloaded_error"},
              {"message", "the server is shutting down: the request was aborted"}}}});
      return;
    }
    // A reply with no block at all still gets its (empty) text block, as the whole response.
    if (index_ == 0 && block_ == Block::kNone)
      Open(out, Block::kText, {{"type", "text"}, {"text", ""}});
    Close(out);
    const StopReason stop = StopOf(*replies_);
    Emit(out, "message_delta",
         {{"type", "message_delta"},
          {"delta", {{"stop_reason", stop.reason}, {"stop_sequence", stop.sequence}}},
          {"usage", {{"output_tokens", gen.usage().completion_tokens}}}});
    Emit(out, "message_stop", {{"type", "message_stop"}});
  }

  const std::string id_, model_;
  std::shared_ptr<ChatReplies> replies_;
  bool started_ = false, pinged_ = false, finished_ = false;
  Block block_ = Block::kNone;
  int index_ = 0;         // of the open block, or of the next one
  int tool_index_ = -1;   // the parser's index of the open tool_use block
  std::string thinking_;  // the open thinking block's text, for its signature
};

}  // namespace

void HandleMessages(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const ReleaseAfterLargeRequest release_memory(req.body.size());  // destroyed last
  const Json body = ParseBody(req.body);
  CheckModel(body, ctx);
  if (!ctx.chat_template)
    throw BadRequest("this model has no chat template; start the server with --chat-template");
  ChatRequest request = ParseAnthropicRequest(body, ctx, /*count_only=*/false);
  ChatRun run = StartChat(ctx, request);
  auto writer = std::make_shared<AnthropicWriter>(ctx.config.served_model_name, run.replies);
  Respond(ctx, req, res, std::move(run.gen), std::move(writer), request.stream);
}

void HandleCountTokens(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const Json body = ParseBody(req.body);
  CheckModel(body, ctx);
  ChatRequest request = ParseAnthropicRequest(body, ctx, /*count_only=*/true);
  const ChatPrompt prompt = RenderChatPrompt(request, ctx);
  res.SetContent(DumpJson(Json{{"input_tokens", prompt.ids.size()}}), "application/json");
}

}  // namespace moeserve::server
