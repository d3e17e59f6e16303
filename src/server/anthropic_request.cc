#include "server/anthropic_request.h"

#include "server/api_error.h"
#include "server/request_parsing.h"

namespace moeserve::server {
namespace {

[[noreturn]] void Unsupported(const std::string& what, const char* param) {
  throw BadRequest(what + " is not supported by this server", param);
}

// A string, or a list of text blocks joined by "\n" (system prompts, tool results).
std::string TextOf(const Json& content, const char* param) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw BadRequest("content must be a string or a list of blocks", param);
  std::string text;
  for (const Json& block : content) {
    if (!block.is_object() || !block.contains("type") || !block["type"].is_string())
      throw BadRequest("each content block needs a string 'type'", param);
    const std::string type = block["type"].get<std::string>();
    if (type != "text") Unsupported("content block type '" + type + "' here", param);
    if (!block.contains("text") || !block["text"].is_string())
      throw BadRequest("a text block needs a string 'text'", param);
    if (!text.empty()) text += "\n";
    text += block["text"].get<std::string>();
  }
  return text;
}

const std::string& StringField(const Json& block, const char* name, const char* what) {
  auto it = block.find(name);
  if (it == block.end() || !it->is_string())
    throw BadRequest(std::string(what) + " needs a string '" + name + "'", "messages");
  return it->get_ref<const std::string&>();
}

// One user message: its tool_result blocks become `tool` messages (in order), its text blocks one
// user message after them.
void AddUserMessage(const Json& content, Json& out) {
  if (content.is_string()) {
    out.push_back({{"role", "user"}, {"content", content}});
    return;
  }
  if (!content.is_array())
    throw BadRequest("content must be a string or a list of blocks", "messages");
  std::string text;
  bool any_tool_result = false;
  for (const Json& block : content) {
    const std::string& type = StringField(block, "type", "a content block");
    if (type == "text") {
      if (!text.empty()) text += "\n";
      text += StringField(block, "text", "a text block");
    } else if (type == "tool_result") {
      any_tool_result = true;
      out.push_back({{"role", "tool"},
                     {"tool_call_id", StringField(block, "tool_use_id", "a tool_result block")},
                     {"content", TextOf(block.value("content", Json("")), "messages")}});
    } else {
      Unsupported("content block type '" + type + "'", "messages");
    }
  }
  if (!text.empty() || !any_tool_result) out.push_back({{"role", "user"}, {"content", text}});
}

// One assistant message: thinking -> reasoning_content, text -> content, tool_use -> tool_calls.
void AddAssistantMessage(const Json& content, Json& out) {
  if (content.is_string()) {
    out.push_back({{"role", "assistant"}, {"content", content}});
    return;
  }
  if (!content.is_array())
    throw BadRequest("content must be a string or a list of blocks", "messages");
  std::string text, reasoning;
  Json calls = Json::array();
  for (const Json& block : content) {
    const std::string& type = StringField(block, "type", "a content block");
    if (type == "text") {
      text += StringField(block, "text", "a text block");
    } else if (type == "thinking") {
      reasoning += StringField(block, "thinking", "a thinking block");
    } else if (type == "redacted_thinking") {
      // Encrypted by Anthropic: nothing a template could render.
    } else if (type == "tool_use") {
      const Json input = block.value("input", Json::object());
      if (!input.is_object())
        throw BadRequest("a tool_use block's 'input' must be an object", "messages");
      calls.push_back(
          {{"id", StringField(block, "id", "a tool_use block")},
           {"type", "function"},
           {"function",
            {{"name", StringField(block, "name", "a tool_use block")}, {"arguments", input}}}});
    } else {
      Unsupported("content block type '" + type + "'", "messages");
    }
  }
  Json m = {{"role", "assistant"}, {"content", text}};
  if (!reasoning.empty()) m["reasoning_content"] = reasoning;
  if (!calls.empty()) m["tool_calls"] = std::move(calls);
  out.push_back(std::move(m));
}

Json OpenAIMessages(const Json& body) {
  Json out = Json::array();
  if (auto system = body.find("system"); system != body.end() && !system->is_null()) {
    const std::string text = TextOf(*system, "system");
    if (!text.empty()) out.push_back({{"role", "system"}, {"content", text}});
  }
  auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array() || messages->empty())
    throw BadRequest("'messages' must be a non-empty list", "messages");
  for (const Json& m : *messages) {
    if (!m.is_object()) throw BadRequest("each message must be an object", "messages");
    const std::string role = m.value("role", "");
    const Json content = m.value("content", Json(nullptr));
    if (role == "user")
      AddUserMessage(content, out);
    else if (role == "assistant")
      AddAssistantMessage(content, out);
    else
      throw BadRequest("a message's 'role' must be \"user\" or \"assistant\"", "messages");
  }
  return out;
}

Json OpenAITools(const Json& tools) {
  if (tools.is_null()) return tools;
  if (!tools.is_array()) throw BadRequest("'tools' must be a list", "tools");
  Json out = Json::array();
  for (const Json& t : tools) {
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string())
      throw BadRequest("each tool needs a string 'name'", "tools");
    const std::string type = t.value("type", "custom");
    if (type != "custom") Unsupported("tool type '" + type + "'", "tools");
    Json fn = {{"name", t["name"]}};
    if (t.contains("description")) fn["description"] = t["description"];
    fn["parameters"] = t.value("input_schema", Json::object());
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

// Anthropic tool_choice -> OpenAI's; sets parallel_tool_calls from disable_parallel_tool_use.
Json OpenAIToolChoice(const Json& choice, bool& parallel) {
  if (choice.is_null()) return choice;
  if (!choice.is_object() || !choice.contains("type") || !choice["type"].is_string())
    throw BadRequest("'tool_choice' must be an object with a 'type'", "tool_choice");
  if (auto d = choice.find("disable_parallel_tool_use"); d != choice.end() && d->is_boolean())
    parallel = !d->get<bool>();
  const std::string type = choice["type"].get<std::string>();
  if (type == "auto") return "auto";
  if (type == "any") return "required";
  if (type == "none") return "none";
  if (type == "tool") {
    if (!choice.contains("name") || !choice["name"].is_string())
      throw BadRequest("tool_choice of type 'tool' needs a 'name'", "tool_choice");
    return {{"type", "function"}, {"function", {{"name", choice["name"]}}}};
  }
  throw BadRequest("'tool_choice' type must be auto, any, tool or none", "tool_choice");
}

}  // namespace

ChatRequest ParseAnthropicRequest(const Json& body, const ServingContext& ctx, bool count_only) {
  ChatRequest r;
  r.messages = NormalizeMessages(OpenAIMessages(body), ctx.config.limits);
  const Json tools = OpenAITools(body.value("tools", Json(nullptr)));
  const Json tool_choice =
      OpenAIToolChoice(body.value("tool_choice", Json(nullptr)), r.parallel_tool_calls);
  SetTools(r, tools, tool_choice, ctx);
  ConstrainToolCalls(r, ctx);
  std::vector<std::string> unhonoured;
  if (auto thinking = body.find("thinking"); thinking != body.end() && thinking->is_object()) {
    if (thinking->value("type", "") == "disabled") r.template_kwargs["enable_thinking"] = false;
    if (thinking->contains("budget_tokens")) unhonoured.push_back("thinking.budget_tokens");
  }
  if (count_only) return r;

  // The sampling fields under their OpenAI names, for the shared parser.
  Json sampling = Json::object();
  for (const char* name : {"temperature", "top_p", "top_k"})
    if (body.contains(name)) sampling[name] = body[name];
  auto max_tokens = body.find("max_tokens");
  if (max_tokens == body.end() || max_tokens->is_null())
    throw BadRequest("max_tokens: Field required", "max_tokens");
  sampling["max_tokens"] = *max_tokens;
  if (auto stop = body.find("stop_sequences"); stop != body.end() && !stop->is_null()) {
    if (!stop->is_array())
      throw BadRequest("'stop_sequences' must be a list of strings", "stop_sequences");
    sampling["stop"] = *stop;
  }
  r.sampling = ParseSampling(sampling, ctx, /*chat=*/true);
  r.stream = GetBool(body, "stream").value_or(false);
  LogIgnoredFields("POST /v1/messages", body,
                   {{"model", "messages", "system", "max_tokens", "stop_sequences", "temperature",
                     "top_p", "top_k", "metadata", "stream", "tools", "tool_choice", "thinking"}},
                   unhonoured);
  return r;
}

}  // namespace moeserve::server
