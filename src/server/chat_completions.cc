// POST /v1/chat/completions: the body is parsed into a ChatRequest (chat_request.h), rendered
// and started (chat_replies.h), and answered in OpenAI's chat.completion envelope
// (openai_envelope.h) with the choice objects below: a whole message, or streamed deltas.
#include "server/api_error.h"
#include "server/chat_replies.h"
#include "server/logprobs_format.h"
#include "server/memory_release.h"
#include "server/openai_envelope.h"
#include "server/routes.h"

namespace moeserve::server {
namespace {

Json ToolCallDeltas(const std::vector<chat::ToolCallDelta>& deltas) {
  Json calls = Json::array();
  for (const auto& t : deltas) {
    Json call = {{"index", t.index}};
    if (!t.id.empty()) {
      call["id"] = t.id;
      call["type"] = "function";
      call["function"] = {{"name", t.name}, {"arguments", t.arguments}};
    } else {
      call["function"] = {{"arguments", t.arguments}};
    }
    calls.push_back(std::move(call));
  }
  return calls;
}

class ChatChoiceFormat final : public ChoiceFormat {
 public:
  ChatChoiceFormat(const ServingContext& ctx, const ChatRequest& request,
                   std::shared_ptr<ChatReplies> replies)
      : tok_(ctx.tokenizer),
        logprobs_(request.logprobs),
        replies_(std::move(replies)),
        final_logprobs_(replies_->num_choices(), Json::array()) {}

  std::vector<Json> StreamStart() override {
    std::vector<Json> out;
    for (size_t i = 0; i < replies_->num_choices(); ++i)
      out.push_back({{"index", i},
                     {"delta", {{"role", "assistant"}, {"content", ""}}},
                     {"logprobs", nullptr},
                     {"finish_reason", nullptr}});
    return out;
  }

  Json ChunkChoice(ChoiceUpdate& u) override {
    Json lp = Json::array();
    chat::ParsedDelta d = Apply(u, lp);
    if (d.empty() && lp.empty() && !u.finished) return nullptr;
    Json delta = Json::object();
    if (!d.reasoning_content.empty()) delta["reasoning_content"] = d.reasoning_content;
    if (!d.content.empty()) delta["content"] = d.content;
    if (!d.tool_calls.empty()) delta["tool_calls"] = ToolCallDeltas(d.tool_calls);
    Json choice = {{"index", u.choice},
                   {"delta", std::move(delta)},
                   {"logprobs", logprobs_.enabled ? Json({{"content", lp}}) : Json(nullptr)},
                   {"finish_reason", nullptr}};
    if (u.finished) {
      choice["finish_reason"] = replies_->FinishReason(u.choice);
      choice["stop_reason"] = StopReasonJson(u);
    }
    return choice;
  }

  void Absorb(ChoiceUpdate& u) override { Apply(u, final_logprobs_[u.choice]); }

  Json FinalChoice(size_t i) override {
    const ChatReplies::Choice& c = replies_->choice(i);
    const chat::ParsedReply& reply = c.reply;
    Json msg = {{"role", "assistant"}};
    msg["content"] =
        reply.content.empty() && !reply.tool_calls.empty() ? Json(nullptr) : Json(reply.content);
    if (replies_->reasoning_enabled())
      msg["reasoning_content"] =
          reply.reasoning_content.empty() ? Json(nullptr) : Json(reply.reasoning_content);
    if (!reply.tool_calls.empty()) {
      Json calls = Json::array();
      for (const auto& call : reply.tool_calls) calls.push_back(call.ToOpenAI());
      msg["tool_calls"] = calls;
    }
    return {
        {"index", i},
        {"message", msg},
        {"logprobs", logprobs_.enabled ? Json({{"content", final_logprobs_[i]}}) : Json(nullptr)},
        {"finish_reason", replies_->FinishReason(i)},
        {"stop_reason", StopReasonJson(c.last)}};
  }

 private:
  // Parses the update's text and appends its logprobs entries to `lp`.
  chat::ParsedDelta Apply(ChoiceUpdate& u, Json& lp) {
    chat::ParsedDelta d = replies_->Push(u);
    if (logprobs_.enabled)
      for (const auto& l : u.logprobs)
        lp.push_back(ChatLogprobEntry(tok_, l, logprobs_.num_top, logprobs_.as_token_ids));
    return d;
  }

  const tokenizer::Tokenizer& tok_;
  const LogprobOptions logprobs_;
  std::shared_ptr<ChatReplies> replies_;
  std::vector<Json> final_logprobs_;
};

}  // namespace

void HandleChatCompletions(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const ReleaseAfterLargeRequest release_memory(req.body.size());  // destroyed last
  const Json body = ParseBody(req.body);
  CheckModel(body, ctx);
  if (!ctx.chat_template)
    throw BadRequest("this model has no chat template; start the server with --chat-template");
  ChatRequest request = ParseChatRequest(body, ctx);
  ChatRun run = StartChat(ctx, request);
  EnvelopeFields fields{.id = RandomId("chatcmpl-"),
                        .object = "chat.completion",
                        .chunk_object = "chat.completion.chunk",
                        .created = UnixSeconds(),
                        .model = ctx.config.served_model_name,
                        .include_usage = request.include_usage};
  auto writer = MakeOpenAIWriter(std::move(fields),
                                 std::make_unique<ChatChoiceFormat>(ctx, request, run.replies));
  Respond(ctx, req, res, std::move(run.gen), std::move(writer), request.stream);
}

}  // namespace moeserve::server
