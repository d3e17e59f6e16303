// POST /v1/responses and GET /v1/responses/{id}: the OpenAI Responses API on the chat path
// (responses_request.h maps the request; ChatReplies splits the reply). The reply becomes output
// items in the order the model wrote them: reasoning (reasoning_text content), message
// (output_text), function_call.
//
// A streamed reply is OpenAI's event sequence, each a named SSE event with a sequence_number:
//   response.created, response.in_progress (status in_progress, no output)
//   reasoning: output_item.added, content_part.added, reasoning_text.delta..., reasoning_text.done,
//              content_part.done, output_item.done
//   message:   output_item.added, content_part.added, output_text.delta..., output_text.done,
//              content_part.done, output_item.done
//   call:      output_item.added, function_call_arguments.delta..., function_call_arguments.done,
//              output_item.done
//   response.completed (or response.incomplete at max_output_tokens; response.failed when the
//   server gives up at the drain deadline) with the whole response and its usage.
// Responses are stored (response_store.h) unless `store: false`.
#include "server/api_error.h"
#include "server/chat_replies.h"
#include "server/memory_release.h"
#include "server/response_writer.h"
#include "server/responses_request.h"
#include "server/route_table.h"
#include "server/routes.h"

namespace moeserve::server {
namespace {

Json OrNull(const Json& j) {
  return j.is_null() ? Json(nullptr) : j;
}

class ResponsesWriter final : public ResponseWriter {
 public:
  ResponsesWriter(ServingContext& ctx, ResponsesRequest request,
                  std::shared_ptr<ChatReplies> replies)
      : ctx_(ctx),
        request_(std::move(request)),
        replies_(std::move(replies)),
        id_(RandomId("resp_")),
        created_(UnixSeconds()) {}

  void Absorb(ChoiceUpdate& u) override { replies_->Push(u); }

  Json Body(const Generation& gen) override {
    const chat::ParsedReply& reply = replies_->choice(0).reply;
    Json output = Json::array();
    if (!reply.reasoning_content.empty())
      output.push_back(ReasoningItem(RandomId("rs_"), reply.reasoning_content));
    if (!reply.content.empty() || reply.tool_calls.empty())
      output.push_back(MessageItem(RandomId("msg_"), reply.content, "completed"));
    for (const chat::ToolCall& call : reply.tool_calls)
      output.push_back(CallItem(RandomId("fc_"), call.id, call.name, call.arguments, "completed"));
    Json response = Response(FinalStatus(), std::move(output), &gen);
    Store(response);
    return response;
  }

  void Stream(std::vector<ChoiceUpdate>& updates, const Generation& gen,
              std::string& out) override {
    if (!started_) {
      started_ = true;
      Json response = Response("in_progress", Json::array(), nullptr);
      Emit(out, "response.created", {{"response", response}});
      Emit(out, "response.in_progress", {{"response", std::move(response)}});
    }
    for (ChoiceUpdate& u : updates) {
      if (finished_) break;
      const chat::ParsedDelta d = replies_->Push(u);
      if (!d.reasoning_content.empty()) {
        if (kind_ != Kind::kReasoning) OpenReasoning(out);
        text_ += d.reasoning_content;
        Emit(out, "response.reasoning_text.delta",
             ItemFields({{"content_index", 0}, {"delta", d.reasoning_content}}));
      }
      if (!d.content.empty()) {
        if (kind_ != Kind::kMessage) OpenMessage(out);
        text_ += d.content;
        Emit(out, "response.output_text.delta",
             ItemFields({{"content_index", 0}, {"delta", d.content}, {"logprobs", Json::array()}}));
      }
      for (const chat::ToolCallDelta& t : d.tool_calls) {
        if (kind_ != Kind::kCall || t.index != call_index_) OpenCall(out, t);
        text_ += t.arguments;
        if (!t.arguments.empty())
          Emit(out, "response.function_call_arguments.delta", ItemFields({{"delta", t.arguments}}));
      }
      if (u.finished) Finish(out, gen, u.finish_reason == "abort");
    }
  }

  void StreamEnd(const Generation& gen, std::string& out) override {
    if (!finished_) Finish(out, gen, /*aborted=*/true);
  }

 private:
  enum class Kind { kNone, kReasoning, kMessage, kCall };

  static Json ReasoningItem(const std::string& id, const std::string& text) {
    return {{"id", id},
            {"type", "reasoning"},
            {"summary", Json::array()},
            {"content", Json::array({{{"type", "reasoning_text"}, {"text", text}}})}};
  }
  static Json TextPart(const std::string& text) {
    return {{"type", "output_text"},
            {"text", text},
            {"annotations", Json::array()},
            {"logprobs", Json::array()}};
  }
  static Json MessageItem(const std::string& id, const std::string& text, const char* status) {
    Json content = Json::array();
    if (std::string_view(status) == "completed") content.push_back(TextPart(text));
    return {{"id", id},
            {"type", "message"},
            {"status", status},
            {"role", "assistant"},
            {"content", std::move(content)}};
  }
  static Json CallItem(const std::string& id, const std::string& call_id, const std::string& name,
                       const std::string& arguments, const char* status) {
    return {{"id", id},     {"type", "function_call"}, {"status", status}, {"call_id", call_id},
            {"name", name}, {"arguments", arguments}};
  }

  // "completed", or "incomplete" when max_output_tokens cut the reply.
  std::string FinalStatus() const {
    return replies_->choice(0).last.finish_reason == "length" ? "incomplete" : "completed";
  }

  Json Usage(const Generation& gen) const {
    const TokenUsage& u = gen.usage();
    // Token counts of the reasoning text (the engine counts tokens, not which part they are).
    const std::string& reasoning = replies_->choice(0).reply.reasoning_content;
    const size_t reasoning_tokens =
        reasoning.empty() ? 0 : ctx_.tokenizer.Encode(reasoning, false).size();
    return {{"input_tokens", u.prompt_tokens},
            {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
            {"output_tokens", u.completion_tokens},
            {"output_tokens_details",
             {{"reasoning_tokens", std::min(reasoning_tokens, u.completion_tokens)}}},
            {"total_tokens", u.prompt_tokens + u.completion_tokens}};
  }

  Json Response(const std::string& status, Json output, const Generation* gen) const {
    const ChatRequest& chat = request_.chat;
    Json incomplete = nullptr;
    if (status == "incomplete") incomplete = {{"reason", "max_output_tokens"}};
    Json tools = request_.tools.is_null() ? Json::array() : request_.tools;
    Json text = request_.text.is_null() ? Json({{"format", {{"type", "text"}}}}) : request_.text;
    return {{"id", id_},
            {"object", "response"},
            {"created_at", created_},
            {"status", status},
            {"error", nullptr},
            {"incomplete_details", std::move(incomplete)},
            {"instructions", OrNull(request_.instructions)},
            {"max_output_tokens", OrNull(request_.max_output_tokens)},
            {"model", ctx_.config.served_model_name},
            {"output", std::move(output)},
            {"parallel_tool_calls", chat.parallel_tool_calls},
            {"previous_response_id",
             request_.previous_response_id ? Json(*request_.previous_response_id) : Json(nullptr)},
            {"reasoning", OrNull(request_.reasoning)},
            {"store", request_.store},
            {"temperature", chat.sampling.params.temperature},
            {"text", std::move(text)},
            {"tool_choice", request_.tool_choice.is_null() ? Json("auto") : request_.tool_choice},
            {"tools", std::move(tools)},
            {"top_p", chat.sampling.params.top_p},
            {"truncation", "disabled"},
            {"usage", gen ? Usage(*gen) : Json(nullptr)},
            {"metadata", request_.metadata.is_null() ? Json::object() : request_.metadata}};
  }

  // Keeps the response and the conversation it ends, for previous_response_id and GET.
  void Store(const Json& response) {
    if (!request_.store) return;
    const chat::ParsedReply& reply = replies_->choice(0).reply;
    Json messages = request_.conversation;
    Json turn = {{"role", "assistant"}, {"content", reply.content}};
    if (!reply.reasoning_content.empty()) turn["reasoning_content"] = reply.reasoning_content;
    if (!reply.tool_calls.empty()) {
      turn["tool_calls"] = Json::array();
      for (const chat::ToolCall& call : reply.tool_calls)
        turn["tool_calls"].push_back(call.ToOpenAI());
    }
    messages.push_back(std::move(turn));
    ctx_.responses.Put(id_, {response, std::move(messages)});
  }

  void Emit(std::string& out, const char* type, Json fields) {
    Json event = {{"type", type}, {"sequence_number", sequence_++}};
    for (auto& [k, v] : fields.items()) event[k] = std::move(v);
    out += NamedSseEvent(type, event);
  }

  // {item_id, output_index} of the open item, then `more`.
  Json ItemFields(Json more) const {
    Json f = {{"item_id", item_["id"]}, {"output_index", output_.size()}};
    for (auto& [k, v] : more.items()) f[k] = v;
    return f;
  }

  void Open(std::string& out, Kind kind, Json item) {
    Close(out);
    kind_ = kind;
    item_ = std::move(item);
    text_.clear();
    Emit(out, "response.output_item.added", {{"output_index", output_.size()}, {"item", item_}});
  }

  void OpenReasoning(std::string& out) {
    Json item = ReasoningItem(RandomId("rs_"), "");
    item["content"] = Json::array();
    Open(out, Kind::kReasoning, std::move(item));
    Emit(out, "response.content_part.added",
         ItemFields({{"content_index", 0}, {"part", {{"type", "reasoning_text"}, {"text", ""}}}}));
  }

  void OpenMessage(std::string& out) {
    Open(out, Kind::kMessage, MessageItem(RandomId("msg_"), "", "in_progress"));
    Emit(out, "response.content_part.added",
         ItemFields({{"content_index", 0}, {"part", TextPart("")}}));
  }

  void OpenCall(std::string& out, const chat::ToolCallDelta& t) {
    Close(out);  // the previous call's name and id are still needed there
    call_index_ = t.index;
    call_name_ = t.name;
    call_id_ = t.id;
    Open(out, Kind::kCall, CallItem(RandomId("fc_"), t.id, t.name, "", "in_progress"));
  }

  void Close(std::string& out) {
    if (kind_ == Kind::kNone) return;
    Json done;
    if (kind_ == Kind::kReasoning) {
      const Json part = {{"type", "reasoning_text"}, {"text", text_}};
      Emit(out, "response.reasoning_text.done",
           ItemFields({{"content_index", 0}, {"text", text_}}));
      Emit(out, "response.content_part.done", ItemFields({{"content_index", 0}, {"part", part}}));
      done = ReasoningItem(item_["id"], text_);
    } else if (kind_ == Kind::kMessage) {
      Emit(out, "response.output_text.done",
           ItemFields({{"content_index", 0}, {"text", text_}, {"logprobs", Json::array()}}));
      Emit(out, "response.content_part.done",
           ItemFields({{"content_index", 0}, {"part", TextPart(text_)}}));
      done = MessageItem(item_["id"], text_, "completed");
    } else {
      Emit(out, "response.function_call_arguments.done",
           ItemFields({{"name", call_name_}, {"arguments", text_}}));
      done = CallItem(item_["id"], call_id_, call_name_, text_, "completed");
    }
    Emit(out, "response.output_item.done", {{"output_index", output_.size()}, {"item", done}});
    output_.push_back(std::move(done));
    kind_ = Kind::kNone;
  }

  void Finish(std::string& out, const Generation& gen, bool aborted) {
    finished_ = true;
    if (aborted) {
      Close(out);
      Json response = Response("failed", output_, &gen);
      response["error"] = {{"code", "server_error"},
                           {"message", "the server is shutting down: the request was aborted"}};
      Emit(out, "response.failed", {{"response", std::move(response)}});
      return;
    }
    // A reply with no item at all still gets its (empty) message, as the whole response.
    if (output_.empty() && kind_ == Kind::kNone) OpenMessage(out);
    Close(out);
    const std::string status = FinalStatus();
    Json response = Response(status, output_, &gen);
    Store(response);
    Emit(out, status == "incomplete" ? "response.incomplete" : "response.completed",
         {{"response", std::move(response)}});
  }

  ServingContext& ctx_;
  const ResponsesRequest request_;
  std::shared_ptr<ChatReplies> replies_;
  const std::string id_;
  const int64_t created_;
  bool started_ = false, finished_ = false;
  int64_t sequence_ = 0;
  Json output_ = Json::array();  // the items closed so far
  Kind kind_ = Kind::kNone;
  Json item_;         // the open item as announced
  std::string text_;  // the open item's text (reasoning, message text, call arguments)
  int call_index_ = -1;
  std::string call_name_, call_id_;
};

}  // namespace

void HandleResponses(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const ReleaseAfterLargeRequest release_memory(req.body.size());  // destroyed last
  const Json body = ParseBody(req.body);
  CheckModel(body, ctx);
  if (!ctx.chat_template)
    throw BadRequest("this model has no chat template; start the server with --chat-template");
  ResponsesRequest request = ParseResponsesRequest(body, ctx);
  ChatRun run = StartChat(ctx, request.chat);
  const bool stream = request.chat.stream;
  auto writer = std::make_shared<ResponsesWriter>(ctx, std::move(request), run.replies);
  Respond(ctx, req, res, std::move(run.gen), std::move(writer), stream);
}

void HandleGetResponse(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const std::string id = PathParameter(req);
  std::optional<ResponseStore::Entry> entry = ctx.responses.Get(id);
  if (!entry)
    throw ApiError(404, "Response with id '" + id + "' not found.", "invalid_request_error", "id");
  res.SetContent(DumpJson(entry->response), "application/json");
}

}  // namespace moeserve::server
