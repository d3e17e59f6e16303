#include "server/responses_request.h"

#include "server/api_error.h"
#include "server/request_parsing.h"

namespace moeserve::server {
namespace {

// A string, or a list of input_text / output_text / text parts joined by "\n".
std::string PartsText(const Json& content, const char* param) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw BadRequest("content must be a string or a list of parts", param);
  std::string text;
  for (const Json& part : content) {
    const std::string type = part.is_object() ? part.value("type", "") : "";
    if (type != "input_text" && type != "output_text" && type != "text")
      throw BadRequest("content part type '" + type + "' is not supported by this server", param);
    if (!part.contains("text") || !part["text"].is_string())
      throw BadRequest("a text part needs a string 'text'", param);
    if (!text.empty()) text += "\n";
    text += part["text"].get<std::string>();
  }
  return text;
}

const std::string& StringField(const Json& item, const char* name, const char* what) {
  auto it = item.find(name);
  if (it == item.end() || !it->is_string())
    throw BadRequest(std::string(what) + " needs a string '" + name + "'", "input");
  return it->get_ref<const std::string&>();
}

// Input items -> chat messages, appended to `out`. Reasoning waits for the assistant message or
// call that follows it; calls join the assistant message right before them.
void AddInputItems(const Json& input, Json& out) {
  if (input.is_string()) {
    out.push_back({{"role", "user"}, {"content", input}});
    return;
  }
  if (!input.is_array()) throw BadRequest("'input' must be a string or a list of items", "input");
  std::string reasoning;
  bool assistant_open = false;  // the last message is an assistant turn calls may join
  auto assistant = [&](std::string content) -> Json& {
    out.push_back({{"role", "assistant"}, {"content", std::move(content)}});
    if (!reasoning.empty()) out.back()["reasoning_content"] = reasoning;
    reasoning.clear();
    assistant_open = true;
    return out.back();
  };
  for (const Json& item : input) {
    if (!item.is_object()) throw BadRequest("each input item must be an object", "input");
    const std::string type = item.value("type", "message");
    if (type == "message") {
      const std::string& role = StringField(item, "role", "a message");
      const std::string text = PartsText(item.value("content", Json(nullptr)), "input");
      if (role == "assistant") {
        assistant(text);
        continue;
      }
      if (role != "user" && role != "system" && role != "developer")
        throw BadRequest("a message's role must be user, system, developer or assistant", "input");
      out.push_back({{"role", role == "developer" ? "system" : role}, {"content", text}});
      assistant_open = false;
    } else if (type == "reasoning") {
      std::string text;
      for (const char* field : {"content", "summary"}) {
        if (!text.empty()) break;
        if (auto parts = item.find(field); parts != item.end() && parts->is_array())
          for (const Json& p : *parts)
            if (p.is_object() && p.contains("text") && p["text"].is_string())
              text += p["text"].get<std::string>();
      }
      reasoning += text;
    } else if (type == "function_call") {
      Json call = {{"id", StringField(item, "call_id", "a function_call")},
                   {"type", "function"},
                   {"function",
                    {{"name", StringField(item, "name", "a function_call")},
                     {"arguments", StringField(item, "arguments", "a function_call")}}}};
      Json& m = assistant_open && reasoning.empty() ? out.back() : assistant("");
      if (!m.contains("tool_calls")) m["tool_calls"] = Json::array();
      m["tool_calls"].push_back(std::move(call));
    } else if (type == "function_call_output") {
      const Json output = item.value("output", Json(""));
      out.push_back({{"role", "tool"},
                     {"tool_call_id", StringField(item, "call_id", "a function_call_output")},
                     {"content", PartsText(output, "input")}});
      assistant_open = false;
    } else {
      throw BadRequest("input item type '" + type + "' is not supported by this server", "input");
    }
  }
}

Json ChatTools(const Json& tools) {
  if (tools.is_null()) return tools;
  if (!tools.is_array()) throw BadRequest("'tools' must be a list", "tools");
  Json out = Json::array();
  for (const Json& t : tools) {
    const std::string type = t.is_object() ? t.value("type", "") : "";
    if (type != "function")
      throw BadRequest("tool type '" + type + "' is not supported by this server (function only)",
                       "tools");
    if (!t.contains("name") || !t["name"].is_string())
      throw BadRequest("each function tool needs a string 'name'", "tools");
    Json fn = {{"name", t["name"]}};
    if (t.contains("description")) fn["description"] = t["description"];
    fn["parameters"] = t.value("parameters", Json::object());
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

Json ChatToolChoice(const Json& choice) {
  if (choice.is_null() || choice.is_string()) return choice;
  if (choice.is_object() && choice.value("type", "") == "function" && choice.contains("name"))
    return {{"type", "function"}, {"function", {{"name", choice["name"]}}}};
  throw BadRequest("'tool_choice' must be none, auto, required or {type: function, name}",
                   "tool_choice");
}

// text.format -> the chat response_format (null for plain text).
Json ResponseFormat(const Json& text) {
  if (!text.is_object() || !text.contains("format") || !text["format"].is_object()) return nullptr;
  const Json& f = text["format"];
  const std::string type = f.value("type", "text");
  if (type == "text") return nullptr;
  if (type == "json_schema") {
    Json schema = {{"name", f.value("name", "response")},
                   {"schema", f.value("schema", Json::object())}};
    if (f.contains("strict")) schema["strict"] = f["strict"];
    return {{"type", "json_schema"}, {"json_schema", std::move(schema)}};
  }
  return {{"type", type}};
}

Json FieldOrNull(const Json& body, const char* name) {
  return body.value(name, Json(nullptr));
}

}  // namespace

ResponsesRequest ParseResponsesRequest(const Json& body, ServingContext& ctx) {
  ResponsesRequest r;
  r.store = GetBool(body, "store").value_or(true);
  if (auto prev = GetString(body, "previous_response_id")) {
    std::optional<ResponseStore::Entry> entry = ctx.responses.Get(*prev);
    if (!entry)
      throw BadRequest("Previous response with id '" + *prev +
                           "' not found (responses are kept in memory, the most recent " +
                           "first, and lost on restart).",
                       "previous_response_id");
    r.previous_response_id = *prev;
    r.conversation = std::move(entry->messages);
  }
  auto input = body.find("input");
  if (input == body.end() || input->is_null()) throw BadRequest("'input' is required", "input");
  AddInputItems(*input, r.conversation);
  r.instructions = FieldOrNull(body, "instructions");
  Json messages = Json::array();
  if (r.instructions.is_string() && !r.instructions.get<std::string>().empty())
    messages.push_back({{"role", "system"}, {"content", r.instructions}});
  for (const Json& m : r.conversation) messages.push_back(m);
  ChatRequest& chat = r.chat;
  chat.messages = NormalizeMessages(messages, ctx.config.limits);
  r.tools = FieldOrNull(body, "tools");
  r.tool_choice = FieldOrNull(body, "tool_choice");
  SetTools(chat, ChatTools(r.tools), ChatToolChoice(r.tool_choice), ctx);
  chat.parallel_tool_calls = GetBool(body, "parallel_tool_calls").value_or(true);
  r.text = FieldOrNull(body, "text");
  chat.response_format = ResponseFormat(r.text);
  // text.format json_schema / json_object constrain the reply as response_format does on chat
  // completions (the same parser: unknown types and unsupported schema keywords are 400s).
  if (!chat.response_format.is_null())
    chat.constraint = ParseConstraint(Json{{"response_format", chat.response_format}});
  ConstrainToolCalls(chat, ctx);

  r.max_output_tokens = FieldOrNull(body, "max_output_tokens");
  r.temperature = FieldOrNull(body, "temperature");
  r.top_p = FieldOrNull(body, "top_p");
  r.metadata = FieldOrNull(body, "metadata");
  r.reasoning = FieldOrNull(body, "reasoning");
  Json sampling = Json::object();
  if (!r.temperature.is_null()) sampling["temperature"] = r.temperature;
  if (!r.top_p.is_null()) sampling["top_p"] = r.top_p;
  if (!r.max_output_tokens.is_null()) sampling["max_tokens"] = r.max_output_tokens;
  try {
    chat.sampling = ParseSampling(sampling, ctx, /*chat=*/true);
  } catch (const ApiError& e) {
    // The shared parser names max_tokens; this API calls it max_output_tokens.
    if (std::string(e.what()).find("max_tokens") == std::string::npos) throw;
    throw BadRequest("'max_output_tokens' must be at least 1", "max_output_tokens");
  }
  chat.stream = GetBool(body, "stream").value_or(false);

  std::vector<std::string> unhonoured;
  if (r.reasoning.is_object() && r.reasoning.contains("effort"))
    unhonoured.push_back("reasoning.effort");
  LogIgnoredFields("POST /v1/responses", body,
                   {{"model", "input", "instructions", "previous_response_id", "store", "tools",
                     "tool_choice", "parallel_tool_calls", "text", "max_output_tokens",
                     "temperature", "top_p", "metadata", "reasoning", "stream", "user"}},
                   unhonoured);
  return r;
}

}  // namespace moeserve::server
