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
  ChatChoiceFormat(const ServingContext& ctx, const ChatRequest& request, const ChatPrompt& prompt,
                   std::shared_ptr<ChatReplies> replies)
      : tok_(ctx.tokenizer),
        logprobs_(request.logprobs),
        prompt_logprobs_(request.sampling.prompt_logprobs),
        prompt_ids_(prompt.ids),
        echo_(EchoedText(request)),
        replies_(std::move(replies)),
        final_logprobs_(replies_->num_choices(), Json::array()) {}

  std::vector<Json> StreamStart() override {
    std::vector<Json> out;
    for (size_t i = 0; i < replies_->num_choices(); ++i)
      out.push_back({{"index", i},
                     {"delta", {{"role", "assistant"}, {"content", ""}}},
                     {"logprobs", nullptr},
                     {"finish_reason", nullptr}});
    if (!echo_.empty())
      for (size_t i = 0; i < replies_->num_choices(); ++i)
        out.push_back({{"index", i},
                       {"delta", {{"content", echo_}}},
                       {"logprobs", nullptr},
                       {"finish_reason", nullptr}});
    return out;
  }

  Json ChunkChoice(ChoiceUpdate& u) override {
    Json lp = Json::array();
    chat::ParsedDelta d = Apply(u, lp);
    if (d.empty() && lp.empty() && !u.finished) return nullptr;
    Json delta = Json::object();
    // Current vLLM names it `reasoning`; clients written for older vLLM read `reasoning_content`.
    if (!d.reasoning_content.empty()) {
      delta["reasoning"] = d.reasoning_content;
      delta["reasoning_content"] = d.reasoning_content;
    }
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

  void Absorb(ChoiceUpdate& u) override {
    if (u.choice == 0 && !u.prompt_logprobs.empty()) prompt_logprob_values_ = u.prompt_logprobs;
    Apply(u, final_logprobs_[u.choice]);
  }

  void AddBodyFields(Json& body) override {
    if (prompt_logprobs_ >= 0)
      body["prompt_logprobs"] =
          PromptLogprobsJson(tok_, prompt_logprob_values_, prompt_ids_, prompt_logprobs_);
  }

  Json FinalChoice(size_t i) override {
    const ChatReplies::Choice& c = replies_->choice(i);
    const chat::ParsedReply& reply = c.reply;
    Json msg = {{"role", "assistant"}};
    msg["content"] = reply.content.empty() && !reply.tool_calls.empty() && echo_.empty()
                         ? Json(nullptr)
                         : Json(echo_ + reply.content);
    if (replies_->reasoning_enabled()) {
      const Json reasoning =
          reply.reasoning_content.empty() ? Json(nullptr) : Json(reply.reasoning_content);
      msg["reasoning"] = reasoning;
      msg["reasoning_content"] = reasoning;
    }
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

  // vLLM's chat echo: the final message's content when it is the assistant's.
  static std::string EchoedText(const ChatRequest& request) {
    if (!request.echo) return "";
    const Json& last = request.messages.back();
    if (last.value("role", "") != "assistant" || !last.contains("content") ||
        !last["content"].is_string())
      return "";
    return last["content"].get<std::string>();
  }

  const tokenizer::Tokenizer& tok_;
  const LogprobOptions logprobs_;
  const int prompt_logprobs_;
  const std::vector<int32_t> prompt_ids_;
  const std::string echo_;
  std::vector<std::optional<engine::TokenLogprobs>> prompt_logprob_values_;
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
  auto writer = MakeOpenAIWriter(
      std::move(fields), std::make_unique<ChatChoiceFormat>(ctx, request, run.prompt, run.replies));
  Respond(ctx, req, res, std::move(run.gen), std::move(writer), request.stream);
}

}  // namespace moeserve::server
