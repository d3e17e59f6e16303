// POST /v1/chat/completions: chat template rendering, reasoning and tool-call parsing, streamed
// deltas in OpenAI's chunk format.
//
// tool_choice (vLLM has guided decoding for "required" and named functions; moeserve has none):
//  - "auto" (default with tools): tools are rendered, calls in the reply are parsed.
//  - "none": tools are still rendered (vLLM's default) but the reply is not parsed for calls.
//  - "required": as "auto"; a reply without a call is returned as plain content, finish "stop".
//  - {"type": "function", "function": {"name": f}}: as "auto", but only calls to f are returned;
//    calls to other functions are dropped (f must be one of `tools`, else 400).
#include "chat/reply_parser.h"
#include "core/check.h"
#include "server/api_error.h"
#include "server/logprobs_format.h"
#include "server/memory_release.h"
#include "server/routes.h"

namespace moeserve::server {
namespace {

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
  return out;
}

struct ToolSettings {
  Json tools;                 // null when absent
  bool parse = false;         // parse the reply for calls
  std::string only_function;  // named tool_choice
};

ToolSettings ParseTools(const Json& body, const ServingContext& ctx) {
  ToolSettings t;
  auto tools = body.find("tools");
  if (tools != body.end() && !tools->is_null()) {
    if (!tools->is_array()) throw BadRequest("'tools' must be a list", "tools");
    const RequestLimits& limits = ctx.config.limits;
    CheckLimit(tools->size(), limits.max_tools, "the number of tools", "max-tools", "tools");
    CheckLimit(DumpJson(*tools).size(), limits.max_tools_bytes, "the JSON bytes of 'tools'",
               "max-tools-bytes", "tools");
    for (const Json& tool : *tools) {
      if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object() ||
          !tool["function"].contains("name") || !tool["function"]["name"].is_string())
        throw BadRequest("each tool needs a 'function' with a string 'name'", "tools");
    }
    if (!tools->empty()) t.tools = *tools;
  }
  std::string choice = t.tools.is_null() ? "none" : "auto";
  auto tc = body.find("tool_choice");
  if (tc != body.end() && !tc->is_null()) {
    if (tc->is_string()) {
      choice = tc->get<std::string>();
      if (choice != "none" && choice != "auto" && choice != "required")
        throw BadRequest("'tool_choice' must be none, auto, required or a function", "tool_choice");
    } else if (tc->is_object() && tc->contains("function") && (*tc)["function"].is_object() &&
               (*tc)["function"].contains("name") && (*tc)["function"]["name"].is_string()) {
      choice = "named";
      t.only_function = (*tc)["function"]["name"].get<std::string>();
    } else {
      throw BadRequest("'tool_choice' must be none, auto, required or a function", "tool_choice");
    }
    if (choice != "none" && t.tools.is_null())
      throw BadRequest("'tool_choice' needs 'tools'", "tool_choice");
    if (choice != "none" && ctx.config.tool_calls == chat::ToolCallFormat::kNone)
      throw BadRequest(
          "tool_choice \"" + choice + "\" needs a tool-call parser (--tool-call-parser)",
          "tool_choice");
  }
  if (!t.only_function.empty()) {
    bool found = false;
    for (const Json& tool : t.tools) found |= tool["function"]["name"] == t.only_function;
    if (!found)
      throw BadRequest("tool_choice names function '" + t.only_function + "', not in 'tools'",
                       "tool_choice");
  }
  t.parse = choice != "none" && !t.tools.is_null() &&
            ctx.config.tool_calls != chat::ToolCallFormat::kNone;
  return t;
}

// Special tokens the reply parsers read; detokenized even with skip_special_tokens.
std::set<int32_t> ParserTokenIds(const ServingContext& ctx) {
  std::set<int32_t> ids;
  for (const char* tag : {"<think>", "</think>", "<minimax:tool_call>", "</minimax:tool_call>",
                          "<tool_call>", "</tool_call>"})
    if (auto id = ctx.tokenizer.TokenToId(tag)) ids.insert(*id);
  return ids;
}

// Per-choice state.
struct ChatChoice {
  std::unique_ptr<chat::ReplyParser> parser;
  chat::ParsedReply reply;  // accumulated (non-streamed) output
  Json logprobs = Json::array();
  std::map<int, int> call_index;  // parser index -> output index, -1 = dropped
  int num_calls = 0;
  std::string finish_reason;
  size_t output_tokens = 0;
};

// Drops calls to functions other than `only`, renumbering the rest.
void FilterCalls(ChatChoice& c, const std::string& only, std::vector<chat::ToolCallDelta>& calls) {
  std::vector<chat::ToolCallDelta> kept;
  for (auto& d : calls) {
    auto it = c.call_index.find(d.index);
    if (it == c.call_index.end()) {
      const bool keep = only.empty() || d.name == only;
      it = c.call_index.emplace(d.index, keep ? c.num_calls++ : -1).first;
    }
    if (it->second < 0) continue;
    d.index = it->second;
    kept.push_back(std::move(d));
  }
  calls = std::move(kept);
}

}  // namespace

void HandleChatCompletions(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const ReleaseAfterLargeRequest release_memory(req.body.size());  // destroyed last
  const Json body = ParseBody(req.body);
  CheckModel(body, ctx);
  if (!ctx.chat_template)
    throw BadRequest("this model has no chat template; start the server with --chat-template");
  auto messages_it = body.find("messages");
  if (messages_it == body.end()) throw BadRequest("'messages' is required", "messages");
  const Json messages =
      chat::ParseToolCallArguments(NormalizeMessages(*messages_it, ctx.config.limits));
  const ToolSettings tools = ParseTools(body, ctx);
  ParsedSampling ps = ParseSampling(body, ctx, /*chat=*/true);
  engine::SamplingParams& params = ps.params;
  CheckLimit(static_cast<size_t>(params.n), ctx.config.limits.max_sequences,
             "the sequences this request asks for ('n')", "max-sequences-per-request", "n");
  const bool want_logprobs = GetBool(body, "logprobs").value_or(false);
  const std::optional<int64_t> top_logprobs = GetInt(body, "top_logprobs");
  if (top_logprobs && (*top_logprobs < 0 || *top_logprobs > engine::SamplingParams::kMaxLogprobs))
    throw BadRequest("'top_logprobs' must be in [0, 20]", "top_logprobs");
  if (top_logprobs && *top_logprobs > 0 && !want_logprobs)
    throw BadRequest("'top_logprobs' needs 'logprobs': true", "top_logprobs");
  const int num_top = static_cast<int>(top_logprobs.value_or(0));
  const bool as_ids = GetBool(body, "return_tokens_as_token_ids").value_or(false);
  if (want_logprobs) params.logprobs = num_top;
  const bool stream = GetBool(body, "stream").value_or(false);
  bool include_usage = false;
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object()) throw BadRequest("'stream_options' must be an object", "stream_options");
    include_usage = GetBool(*so, "include_usage").value_or(false);
  }
  const bool continue_final = GetBool(body, "continue_final_message").value_or(false);
  const bool add_generation_prompt =
      GetBool(body, "add_generation_prompt").value_or(!continue_final);
  if (continue_final && add_generation_prompt)
    throw BadRequest("'continue_final_message' and 'add_generation_prompt' cannot both be true",
                     "continue_final_message");
  Json extra = {{"bos_token", ctx.bos_token}, {"eos_token", ctx.eos_token}};
  if (auto kw = body.find("chat_template_kwargs"); kw != body.end() && !kw->is_null()) {
    if (!kw->is_object())
      throw BadRequest("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    for (const auto& [k, v] : kw->items()) {
      // The renderer's own variables come from the validated request, never from here.
      if (IsReservedTemplateVariable(k))
        throw BadRequest(
            "'chat_template_kwargs' cannot set '" + k + "': the server sets it from the request",
            "chat_template_kwargs");
      extra[k] = v;
    }
  }

  std::string prompt;
  try {
    prompt = chat::ApplyChatTemplate(*ctx.chat_template, messages, tools.tools,
                                     add_generation_prompt, extra);
  } catch (const Error& e) {
    throw BadRequest(std::string("chat template: ") + e.what(), "messages");
  }
  CheckPromptBytes(prompt.size(), ctx, "messages");
  if (continue_final) {
    // Cut what the template appended after the final message (end-of-turn tokens).
    const Json& last = messages.back();
    const std::string content = last.value("content", Json("")).is_string()
                                    ? last["content"].get<std::string>()
                                    : std::string();
    const size_t pos = content.empty() ? std::string::npos : prompt.rfind(content);
    if (pos != std::string::npos) prompt.resize(pos + content.size());
  }
  const std::vector<int32_t> prompt_ids =
      ctx.tokenizer.Encode(prompt, /*add_special_tokens=*/false);
  if (prompt_ids.empty()) throw BadRequest("the rendered prompt is empty", "messages");
  const size_t max_len = ctx.engine.max_model_len();
  if (prompt_ids.size() >= max_len)
    throw BadRequest("This model's maximum context length is " + std::to_string(max_len) +
                         " tokens. However, your messages resulted in " +
                         std::to_string(prompt_ids.size()) + " tokens.",
                     "messages");
  params.max_tokens = ps.max_tokens.value_or(static_cast<int>(max_len - prompt_ids.size()));
  ValidateSampling(params, ctx);

  chat::ParserOptions popts;
  popts.reasoning = ctx.config.reasoning;
  popts.tools = tools.parse ? ctx.config.tool_calls : chat::ToolCallFormat::kNone;
  popts.prompt_opened_think =
      popts.reasoning != chat::ReasoningFormat::kNone && chat::PromptOpensThink(prompt);
  popts.tools_schema = tools.tools;
  ps.text.keep_token_ids = ParserTokenIds(ctx);

  auto gen = std::make_unique<Generation>(ctx);
  gen->Start({prompt_ids}, params, ps.text);
  auto choices = std::make_shared<std::vector<ChatChoice>>(gen->num_choices());
  const uint64_t seed_base = ctx.next_request_id.load() * 1000003u;
  for (size_t i = 0; i < choices->size(); ++i) {
    chat::ParserOptions o = popts;
    o.call_id_seed = seed_base + i;
    (*choices)[i].parser = std::make_unique<chat::ReplyParser>(o);
  }
  const std::string only_function = tools.only_function;
  const auto& tok = ctx.tokenizer;
  // Feeds an update to its choice's parser; returns the delta (tool calls filtered) and appends
  // logprobs entries to `lp`.
  auto apply = [choices, only_function, &tok, want_logprobs, num_top, as_ids](ChoiceUpdate& u,
                                                                              Json& lp) {
    ChatChoice& c = (*choices)[u.choice];
    chat::ParsedDelta d = c.parser->Push(u.text);
    if (u.finished) {
      chat::ParsedDelta tail = c.parser->Finish();
      d.reasoning_content += tail.reasoning_content;
      d.content += tail.content;
      for (auto& t : tail.tool_calls) d.tool_calls.push_back(std::move(t));
      c.finish_reason = u.finish_reason;
    }
    FilterCalls(c, only_function, d.tool_calls);
    if (want_logprobs)
      for (const auto& l : u.logprobs) lp.push_back(ChatLogprobEntry(tok, l, num_top, as_ids));
    c.output_tokens = std::max(c.output_tokens, u.output_tokens);
    return d;
  };
  auto finish_reason = [](const ChatChoice& c) {
    return c.num_calls > 0 && c.finish_reason == "stop" ? std::string("tool_calls")
                                                        : c.finish_reason;
  };
  const size_t prompt_tokens = prompt_ids.size();
  const std::string id = RandomId("chatcmpl");
  const int64_t created = UnixSeconds();
  const std::string model = ctx.config.served_model_name;

  if (!stream) {
    const ClientConnection& conn = req.connection;
    const bool ok = RunToEnd(ctx, *gen, conn, [&](ChoiceUpdate& u) {
      ChatChoice& c = (*choices)[u.choice];
      chat::AccumulateDelta(apply(u, c.logprobs), c.reply);
    });
    if (!ok) {
      res.status = 499;
      return;
    }
    Json out_choices = Json::array();
    size_t completion_tokens = 0;
    for (size_t i = 0; i < choices->size(); ++i) {
      ChatChoice& c = (*choices)[i];
      completion_tokens += c.output_tokens;
      Json msg = {{"role", "assistant"}};
      msg["content"] = c.reply.content.empty() && !c.reply.tool_calls.empty()
                           ? Json(nullptr)
                           : Json(c.reply.content);
      if (popts.reasoning != chat::ReasoningFormat::kNone)
        msg["reasoning_content"] =
            c.reply.reasoning_content.empty() ? Json(nullptr) : Json(c.reply.reasoning_content);
      if (!c.reply.tool_calls.empty()) {
        Json calls = Json::array();
        for (const auto& call : c.reply.tool_calls) calls.push_back(call.ToOpenAI());
        msg["tool_calls"] = calls;
      }
      out_choices.push_back(
          {{"index", i},
           {"message", msg},
           {"logprobs", want_logprobs ? Json({{"content", c.logprobs}}) : Json(nullptr)},
           {"finish_reason", finish_reason(c)},
           {"stop_reason", nullptr}});
    }
    Json out = {{"id", id},
                {"object", "chat.completion"},
                {"created", created},
                {"model", model},
                {"choices", out_choices},
                {"usage", Usage(prompt_tokens, completion_tokens)}};
    res.SetContent(DumpJson(out), "application/json");
    return;
  }

  auto chunk = [id, created, model](Json choice) {
    return SseEvent({{"id", id},
                     {"object", "chat.completion.chunk"},
                     {"created", created},
                     {"model", model},
                     {"choices", Json::array({std::move(choice)})}});
  };
  auto roles_sent = std::make_shared<bool>(false);
  const size_t num_choices = choices->size();
  StreamResponse(
      res, std::move(gen),
      [apply, chunk, choices, finish_reason, want_logprobs, roles_sent, num_choices](
          std::vector<ChoiceUpdate>& updates, auto& write) {
        if (!*roles_sent) {
          *roles_sent = true;
          for (size_t i = 0; i < num_choices; ++i)
            if (!write(chunk({{"index", i},
                              {"delta", {{"role", "assistant"}, {"content", ""}}},
                              {"logprobs", nullptr},
                              {"finish_reason", nullptr}})))
              return false;
        }
        for (ChoiceUpdate& u : updates) {
          Json lp = Json::array();
          chat::ParsedDelta d = apply(u, lp);
          if (d.empty() && lp.empty() && !u.finished) continue;
          Json delta = Json::object();
          if (!d.reasoning_content.empty()) delta["reasoning_content"] = d.reasoning_content;
          if (!d.content.empty()) delta["content"] = d.content;
          if (!d.tool_calls.empty()) {
            Json calls = Json::array();
            for (const auto& t : d.tool_calls) {
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
            delta["tool_calls"] = std::move(calls);
          }
          Json choice = {{"index", u.choice},
                         {"delta", std::move(delta)},
                         {"logprobs", want_logprobs ? Json({{"content", lp}}) : Json(nullptr)},
                         {"finish_reason", nullptr}};
          if (u.finished) {
            choice["finish_reason"] = finish_reason((*choices)[u.choice]);
            choice["stop_reason"] = nullptr;
          }
          if (!write(chunk(std::move(choice)))) return false;
        }
        return true;
      },
      [id, created, model, choices, include_usage, prompt_tokens](auto& write) {
        size_t completion_tokens = 0;
        for (const auto& c : *choices) completion_tokens += c.output_tokens;
        return WriteSseStreamEnd(write, id, "chat.completion.chunk", created, model, include_usage,
                                 prompt_tokens, completion_tokens);
      });
}

}  // namespace moeserve::server
