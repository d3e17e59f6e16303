#include "server/chat_request.h"

#include "chat/chat_template.h"
#include "server/api_error.h"
#include "server/request_limits.h"

namespace moeserve::server {

// OpenAI content parts -> one string (text parts joined by "\n", as vLLM does for string
// templates). The message count is checked first: the template's work grows with it.
Json NormalizeMessages(const Json& messages, const RequestLimits& limits) {
  if (!messages.is_array() || messages.empty())
    throw BadRequest("'messages' must be a non-empty list", "messages");
  CheckLimit(messages.size(), limits.max_messages, "the number of messages",
             "max-messages-per-request", "messages");
  Json out = Json::array();
  for (const Json& m : messages) {
    if (!m.is_object()) throw BadRequest("each message must be an object", "messages");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      throw BadRequest("each message needs a string 'role'", "messages");
    Json copy = m;
    if (auto r = m.find("reasoning");
        r != m.end() && r->is_string() &&
        !(m.contains("reasoning_content") && m["reasoning_content"].is_string()))
      copy["reasoning_content"] = *r;
    auto content = m.find("content");
    if (content != m.end() && content->is_array()) {
      std::string text;
      for (const Json& part : *content) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
            !part["text"].is_string())
          throw BadRequest("only text content parts are supported", "messages");
        if (!text.empty()) text += "\n";
        text += part["text"].get<std::string>();
      }
      copy["content"] = text;
    } else if (content != m.end() && !content->is_string() && !content->is_null()) {
      throw BadRequest("message 'content' must be a string, a list of parts or null", "messages");
    }
    out.push_back(std::move(copy));
  }
  return chat::ParseToolCallArguments(out);
}

void SetTools(ChatRequest& r, const Json& tools, const Json& tool_choice,
              const ServingContext& ctx) {
  if (!tools.is_null()) {
    if (!tools.is_array()) throw BadRequest("'tools' must be a list", "tools");
    const RequestLimits& limits = ctx.config.limits;
    CheckLimit(tools.size(), limits.max_tools, "the number of tools", "max-tools", "tools");
    CheckLimit(DumpJson(tools).size(), limits.max_tools_bytes, "the JSON bytes of 'tools'",
               "max-tools-bytes", "tools");
    for (const Json& tool : tools) {
      if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object() ||
          !tool["function"].contains("name") || !tool["function"]["name"].is_string())
        throw BadRequest("each tool needs a 'function' with a string 'name'", "tools");
    }
    if (!tools.empty()) r.tools = tools;
  }
  using Mode = ToolChoice::Mode;
  ToolChoice& choice = r.tool_choice;
  choice.mode = r.tools.is_null() ? Mode::kNone : Mode::kAuto;
  if (!tool_choice.is_null()) {
    const char* bad = "'tool_choice' must be none, auto, required or a function";
    std::string name;
    if (tool_choice.is_string()) {
      name = tool_choice.get<std::string>();
      if (name == "none")
        choice.mode = Mode::kNone;
      else if (name == "auto")
        choice.mode = Mode::kAuto;
      else if (name == "required")
        choice.mode = Mode::kRequired;
      else
        throw BadRequest(bad, "tool_choice");
    } else if (tool_choice.is_object() && tool_choice.contains("function") &&
               tool_choice["function"].is_object() && tool_choice["function"].contains("name") &&
               tool_choice["function"]["name"].is_string()) {
      choice.mode = Mode::kNamed;
      choice.function = tool_choice["function"]["name"].get<std::string>();
      name = "named";
    } else {
      throw BadRequest(bad, "tool_choice");
    }
    if (choice.mode != Mode::kNone && r.tools.is_null())
      throw BadRequest("'tool_choice' needs 'tools'", "tool_choice");
    if (choice.mode != Mode::kNone && ctx.config.tool_calls == chat::ToolCallFormat::kNone)
      throw BadRequest("tool_choice \"" + name + "\" needs a tool-call parser (--tool-call-parser)",
                       "tool_choice");
  }
  if (choice.mode == Mode::kNamed) {
    bool found = false;
    for (const Json& tool : r.tools) found |= tool["function"]["name"] == choice.function;
    if (!found)
      throw BadRequest("tool_choice names function '" + choice.function + "', not in 'tools'",
                       "tool_choice");
  }
  r.parse_tool_calls = choice.mode != Mode::kNone && !r.tools.is_null() &&
                       ctx.config.tool_calls != chat::ToolCallFormat::kNone;
}

namespace {

const Json& FieldOrNull(const Json& body, const char* name) {
  static const Json kNull;
  auto it = body.find(name);
  return it == body.end() ? kNull : *it;
}

}  // namespace

void ConstrainToolCalls(ChatRequest& r, const ServingContext& ctx) {
  using Mode = ToolChoice::Mode;
  const Mode mode = r.tool_choice.mode;
  if (mode != Mode::kRequired && mode != Mode::kNamed) return;
  ConstraintSpec& spec = r.constraint;
  if (!spec.empty())
    throw BadRequest("'tool_choice' \"" + std::string(mode == Mode::kNamed ? "named" : "required") +
                         "\" constrains the reply to tool calls; it cannot be combined with '" +
                         spec.field + "'",
                     spec.field);
  spec.kind = ConstraintSpec::Kind::kToolCalls;
  spec.field = "tool_choice";
  spec.tools = r.tools;
  spec.tool_format = ctx.config.tool_calls;
  spec.only_function = mode == Mode::kNamed ? r.tool_choice.function : "";
  spec.single_call = mode == Mode::kNamed || !r.parallel_tool_calls;
}

ChatRequest ParseChatRequest(const Json& body, const ServingContext& ctx) {
  ChatRequest r;
  auto messages = body.find("messages");
  if (messages == body.end()) throw BadRequest("'messages' is required", "messages");
  r.messages = NormalizeMessages(*messages, ctx.config.limits);
  SetTools(r, FieldOrNull(body, "tools"), FieldOrNull(body, "tool_choice"), ctx);
  r.parallel_tool_calls = GetBool(body, "parallel_tool_calls").value_or(true);
  r.response_format = FieldOrNull(body, "response_format");
  r.constraint = ParseConstraint(body);
  ConstrainToolCalls(r, ctx);
  r.echo = GetBool(body, "echo").value_or(false);
  r.sampling = ParseSampling(body, ctx, /*chat=*/true);
  CheckLimit(static_cast<size_t>(r.sampling.params.n), ctx.config.limits.max_sequences,
             "the sequences this request asks for ('n')", "max-sequences-per-request", "n");

  r.logprobs.enabled = GetBool(body, "logprobs").value_or(false);
  const std::optional<int64_t> top = GetInt(body, "top_logprobs");
  if (top && (*top < 0 || *top > engine::SamplingParams::kMaxLogprobs))
    throw BadRequest("'top_logprobs' must be in [0, 20]", "top_logprobs");
  if (top && *top > 0 && !r.logprobs.enabled)
    throw BadRequest("'top_logprobs' needs 'logprobs': true", "top_logprobs");
  r.logprobs.num_top = static_cast<int>(top.value_or(0));
  r.logprobs.as_token_ids = GetBool(body, "return_tokens_as_token_ids").value_or(false);
  if (r.logprobs.enabled) r.sampling.params.logprobs = r.logprobs.num_top;

  r.stream = GetBool(body, "stream").value_or(false);
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object()) throw BadRequest("'stream_options' must be an object", "stream_options");
    r.include_usage = GetBool(*so, "include_usage").value_or(false);
  }
  r.continue_final_message = GetBool(body, "continue_final_message").value_or(false);
  r.add_generation_prompt =
      GetBool(body, "add_generation_prompt").value_or(!r.continue_final_message);
  if (r.continue_final_message && r.add_generation_prompt)
    throw BadRequest("'continue_final_message' and 'add_generation_prompt' cannot both be true",
                     "continue_final_message");
  if (auto kw = body.find("chat_template_kwargs"); kw != body.end() && !kw->is_null()) {
    if (!kw->is_object())
      throw BadRequest("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    for (const auto& [k, v] : kw->items()) {
      // The renderer's own variables come from the validated request, never from here.
      if (IsReservedTemplateVariable(k))
        throw BadRequest(
            "'chat_template_kwargs' cannot set '" + k + "': the server sets it from the request",
            "chat_template_kwargs");
      r.template_kwargs[k] = v;
    }
  }
  LogIgnoredFields("POST /v1/chat/completions", body,
                   {kSamplingFields,
                    kConstraintFields,
                    {"messages", "tools", "tool_choice", "parallel_tool_calls",
                     "max_completion_tokens", "top_logprobs", "continue_final_message",
                     "add_generation_prompt", "chat_template_kwargs", "echo"}});
  return r;
}

}  // namespace moeserve::server
