#include "chat/reply_parser.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat/jinja/value.h"

namespace moeserve::chat {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kMiniMaxOpen = "<minimax:tool_call>";
constexpr std::string_view kMiniMaxClose = "</minimax:tool_call>";
constexpr std::string_view kInvokeOpen = "<invoke";
constexpr std::string_view kInvokeClose = "</invoke>";
constexpr std::string_view kParamOpen = "<parameter";
constexpr std::string_view kParamClose = "</parameter>";
constexpr std::string_view kQwenOpen = "<tool_call>";
constexpr std::string_view kQwenClose = "</tool_call>";

bool IsWs(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

size_t LeadingWs(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && IsWs(s[n])) ++n;
  return n;
}

bool StartsWith(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

// `s` is non-empty and could still grow into `tag`.
bool IsProperPrefix(std::string_view s, std::string_view tag) {
  return s.size() < tag.size() && tag.substr(0, s.size()) == s;
}

// Length of the longest suffix of `buf` that is a proper prefix of one of `tags`: text that must
// be held back because the next delta might complete the tag.
size_t HeldSuffix(std::string_view buf, std::initializer_list<std::string_view> tags) {
  size_t best = 0;
  for (std::string_view tag : tags) {
    for (size_t k = std::min(buf.size(), tag.size() - 1); k > best; --k) {
      if (buf.substr(buf.size() - k) == tag.substr(0, k)) {
        best = k;
        break;
      }
    }
  }
  return best;
}

std::string Unquote(std::string_view s) {
  size_t b = LeadingWs(s);
  s.remove_prefix(b);
  while (!s.empty() && IsWs(s.back())) s.remove_suffix(1);
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front()) {
    s = s.substr(1, s.size() - 2);
  }
  return std::string(s);
}

// `<invoke name="f">` / `<parameter name="k">`: the text between the tag name and '>'.
std::string TagName(std::string_view attrs) {
  size_t eq = attrs.find('=');
  std::string_view key = attrs.substr(0, eq == std::string_view::npos ? 0 : eq);
  size_t b = LeadingWs(key);
  key.remove_prefix(b);
  while (!key.empty() && IsWs(key.back())) key.remove_suffix(1);
  if (eq == std::string_view::npos || key != "name") return Unquote(attrs);
  return Unquote(attrs.substr(eq + 1));
}

std::string SerializeArguments(const nlohmann::ordered_json& args) {
  return jinja::ToJson(jinja::FromJson(args), jinja::JsonOptions{});
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string SchemaType(const nlohmann::ordered_json& schema) {
  if (!schema.is_object() || !schema.contains("type")) return "";
  const auto& t = schema["type"];
  if (t.is_string()) return Lower(t.get<std::string>());
  if (t.is_array()) {
    for (const auto& x : t) {
      if (x.is_string() && x.get<std::string>() != "null") return Lower(x.get<std::string>());
    }
  }
  return "";
}

}  // namespace

nlohmann::ordered_json TypeParameterValue(const std::string& value,
                                          const nlohmann::ordered_json& schema) {
  using ojson = nlohmann::ordered_json;
  if (Lower(value) == "null") return nullptr;
  std::string type = SchemaType(schema);
  std::string trimmed(value.begin() + LeadingWs(value), value.end());
  while (!trimmed.empty() && IsWs(trimmed.back())) trimmed.pop_back();
  if (type == "integer" || type == "int") {
    int64_t i = 0;
    auto r = std::from_chars(trimmed.data(), trimmed.data() + trimmed.size(), i);
    if (!trimmed.empty() && r.ec == std::errc() && r.ptr == trimmed.data() + trimmed.size())
      return i;
    return value;
  }
  if (type == "number" || type == "float") {
    ojson j = ojson::parse(trimmed, nullptr, false);
    if (j.is_number()) {
      double d = j.get<double>();
      if (j.is_number_float() && std::floor(d) == d && std::fabs(d) < 9.0e15) {
        return static_cast<int64_t>(d);
      }
      return j;
    }
    return value;
  }
  if (type == "boolean" || type == "bool") {
    std::string l = Lower(trimmed);
    if (l == "true" || l == "1") return true;
    if (l == "false" || l == "0") return false;
    return value;
  }
  if (type == "object" || type == "array") {
    ojson j = ojson::parse(trimmed, nullptr, false);
    if (!j.is_discarded() && (type == "object" ? j.is_object() : j.is_array())) return j;
    return value;
  }
  return value;
}

nlohmann::ordered_json ToolCall::ToOpenAI() const {
  nlohmann::ordered_json j;
  j["id"] = id;
  j["type"] = "function";
  j["function"] = {{"name", name}, {"arguments", arguments}};
  return j;
}

ReplyParser::ReplyParser(ParserOptions options) : options_(std::move(options)) {
  if (options_.reasoning == ReasoningFormat::kThinkTags) {
    state_ = State::kThinkStart;
  } else {
    state_ = State::kContent;
  }
  if (options_.reasoning == ReasoningFormat::kAppendThink) buffer_ = kThinkOpen;
}

ParsedDelta ReplyParser::Push(std::string_view text) {
  ParsedDelta out;
  buffer_.append(text);
  Process(false, out);
  return out;
}

ParsedDelta ReplyParser::Finish() {
  ParsedDelta out;
  Process(true, out);
  if (state_ == State::kInvoke) {
    FinishCall(SerializeArguments(call_args_), out);
    state_ = State::kMiniMaxBlock;
  }
  buffer_.clear();
  return out;
}

void ReplyParser::Process(bool final, ParsedDelta& out) {
  while (true) {
    bool progressed = false;
    switch (state_) {
      case State::kThinkStart:
        progressed = StepThinkStart(final, out);
        break;
      case State::kReasoning:
        progressed = StepReasoning(final, out);
        break;
      case State::kContent:
        progressed = StepContent(final, out);
        break;
      case State::kMiniMaxBlock:
        progressed = StepMiniMaxBlock(final, out);
        break;
      case State::kInvoke:
        progressed = StepInvoke(final, out);
        break;
      case State::kQwenBlock:
        progressed = StepQwenBlock(final, out);
        break;
    }
    if (!progressed) return;
  }
}

void ReplyParser::EmitContent(std::string_view text, ParsedDelta& out) {
  if (skip_ws_) {
    text.remove_prefix(LeadingWs(text));
    if (text.empty()) return;
    skip_ws_ = false;
  }
  out.content.append(text);
}

void ReplyParser::EmitReasoning(std::string_view text, ParsedDelta& out) {
  if (skip_ws_) {
    text.remove_prefix(LeadingWs(text));
    if (text.empty()) return;
    skip_ws_ = false;
  }
  out.reasoning_content.append(text);
}

bool ReplyParser::StepThinkStart(bool final, ParsedDelta& out) {
  std::string_view rest = std::string_view(buffer_).substr(LeadingWs(buffer_));
  if (StartsWith(rest, kThinkOpen)) {
    buffer_.erase(0, buffer_.size() - rest.size() + kThinkOpen.size());
    state_ = State::kReasoning;
    skip_ws_ = true;
    return true;
  }
  if (!final && (rest.empty() || IsProperPrefix(rest, kThinkOpen))) return false;
  state_ = options_.prompt_opened_think ? State::kReasoning : State::kContent;
  skip_ws_ = options_.prompt_opened_think;
  return true;
}

bool ReplyParser::StepReasoning(bool final, ParsedDelta& out) {
  // Whitespace before </think> belongs to the format, not the reasoning (the templates add it
  // back when the message is rendered again), so trailing whitespace is held back too.
  size_t pos = buffer_.find(kThinkClose);
  if (pos != std::string::npos) {
    size_t end = pos;
    while (end > 0 && IsWs(buffer_[end - 1])) --end;
    EmitReasoning(std::string_view(buffer_).substr(0, end), out);
    buffer_.erase(0, pos + kThinkClose.size());
    state_ = State::kContent;
    skip_ws_ = true;
    return true;
  }
  size_t keep = buffer_.size();
  if (!final) {
    keep -= HeldSuffix(buffer_, {kThinkClose});
    while (keep > 0 && IsWs(buffer_[keep - 1])) --keep;
  }
  EmitReasoning(std::string_view(buffer_).substr(0, keep), out);
  buffer_.erase(0, keep);
  return false;
}

bool ReplyParser::StepContent(bool final, ParsedDelta& out) {
  std::string_view open = options_.tools == ToolCallFormat::kMiniMaxXml  ? kMiniMaxOpen
                          : options_.tools == ToolCallFormat::kQwen3Json ? kQwenOpen
                                                                         : std::string_view();
  if (!open.empty()) {
    size_t pos = buffer_.find(open);
    if (pos != std::string::npos) {
      EmitContent(std::string_view(buffer_).substr(0, pos), out);
      buffer_.erase(0, pos + open.size());
      state_ =
          options_.tools == ToolCallFormat::kMiniMaxXml ? State::kMiniMaxBlock : State::kQwenBlock;
      return true;
    }
  }
  size_t hold = final || open.empty() ? 0 : HeldSuffix(buffer_, {open});
  EmitContent(std::string_view(buffer_).substr(0, buffer_.size() - hold), out);
  buffer_.erase(0, buffer_.size() - hold);
  return false;
}

bool ReplyParser::StepMiniMaxBlock(bool final, ParsedDelta& out) {
  buffer_.erase(0, LeadingWs(buffer_));
  if (buffer_.empty()) return false;
  if (StartsWith(buffer_, kMiniMaxClose)) {
    buffer_.erase(0, kMiniMaxClose.size());
    state_ = State::kContent;
    skip_ws_ = true;
    return true;
  }
  if (StartsWith(buffer_, kInvokeOpen)) {
    size_t gt = buffer_.find('>');
    if (gt == std::string::npos) {
      if (final) buffer_.clear();
      return false;
    }
    std::string name =
        TagName(std::string_view(buffer_).substr(kInvokeOpen.size(), gt - kInvokeOpen.size()));
    buffer_.erase(0, gt + 1);
    StartCall(name, out);
    state_ = State::kInvoke;
    return true;
  }
  if (IsProperPrefix(buffer_, kMiniMaxClose) || IsProperPrefix(buffer_, kInvokeOpen)) {
    if (final) buffer_.clear();
    return false;
  }
  // Stray text inside a block: skip to the next tag.
  size_t next = buffer_.find('<', 1);
  buffer_.erase(0, next == std::string::npos ? buffer_.size() : next);
  return !buffer_.empty();
}

bool ReplyParser::StepInvoke(bool final, ParsedDelta& out) {
  buffer_.erase(0, LeadingWs(buffer_));
  if (buffer_.empty()) return false;
  if (StartsWith(buffer_, kInvokeClose) || StartsWith(buffer_, kMiniMaxClose)) {
    if (StartsWith(buffer_, kInvokeClose)) buffer_.erase(0, kInvokeClose.size());
    FinishCall(SerializeArguments(call_args_), out);
    state_ = State::kMiniMaxBlock;
    return true;
  }
  if (StartsWith(buffer_, kParamOpen)) {
    size_t gt = buffer_.find('>');
    if (gt == std::string::npos) {
      if (final) buffer_.clear();
      return false;
    }
    size_t close = buffer_.find(kParamClose, gt + 1);
    if (close == std::string::npos && !final) return false;
    std::string name =
        TagName(std::string_view(buffer_).substr(kParamOpen.size(), gt - kParamOpen.size()));
    size_t end = close == std::string::npos ? buffer_.size() : close;
    AddParameter(name, buffer_.substr(gt + 1, end - gt - 1));
    buffer_.erase(0, close == std::string::npos ? buffer_.size() : close + kParamClose.size());
    return true;
  }
  if (IsProperPrefix(buffer_, kInvokeClose) || IsProperPrefix(buffer_, kMiniMaxClose) ||
      IsProperPrefix(buffer_, kParamOpen)) {
    if (final) buffer_.clear();
    return false;
  }
  size_t next = buffer_.find('<', 1);
  buffer_.erase(0, next == std::string::npos ? buffer_.size() : next);
  return !buffer_.empty();
}

bool ReplyParser::StepQwenBlock(bool final, ParsedDelta& out) {
  size_t close = buffer_.find(kQwenClose);
  if (close == std::string::npos && !final) return false;
  std::string body = buffer_.substr(0, close == std::string::npos ? buffer_.size() : close);
  buffer_.erase(0, close == std::string::npos ? buffer_.size() : close + kQwenClose.size());
  state_ = State::kContent;
  auto j = nlohmann::ordered_json::parse(body, nullptr, false);
  if (ParseXmlFunction(body, out)) {
    skip_ws_ = true;
  } else if (j.is_object() && j.contains("name") && j["name"].is_string()) {
    StartCall(j["name"].get<std::string>(), out);
    const char* key = j.contains("arguments") ? "arguments" : "parameters";
    nlohmann::ordered_json args = j.contains(key) ? j[key] : nlohmann::ordered_json::object();
    FinishCall(args.is_string() ? args.get<std::string>() : SerializeArguments(args), out);
    skip_ws_ = true;
  } else {
    // Not a tool call after all: keep the text as the model wrote it.
    std::string raw = std::string(kQwenOpen) + body;
    if (close != std::string::npos) raw += kQwenClose;
    EmitContent(raw, out);
  }
  return true;
}

bool ReplyParser::ParseXmlFunction(const std::string& body, ParsedDelta& out) {
  constexpr std::string_view kFunctionOpen = "<function=", kFunctionClose = "</function>";
  constexpr std::string_view kParameterOpen = "<parameter=", kParameterClose = "</parameter>";
  const size_t start = LeadingWs(body);
  if (!StartsWith(std::string_view(body).substr(start), kFunctionOpen)) return false;
  const size_t name_end = body.find('>', start);
  if (name_end == std::string::npos) return false;
  const size_t name_start = start + kFunctionOpen.size();
  StartCall(Unquote(std::string_view(body).substr(name_start, name_end - name_start)), out);
  const size_t end = std::min(body.find(kFunctionClose, name_end), body.size());
  size_t pos = name_end + 1;
  while (true) {
    const size_t p = body.find(kParameterOpen, pos);
    if (p == std::string::npos || p >= end) break;
    const size_t gt = body.find('>', p);
    if (gt == std::string::npos || gt >= end) break;
    const size_t key_start = p + kParameterOpen.size();
    const std::string key = Unquote(std::string_view(body).substr(key_start, gt - key_start));
    size_t close = body.find(kParameterClose, gt + 1);
    // An unclosed parameter runs to the next parameter or the end of the function.
    if (close == std::string::npos || close > end)
      close = std::min(body.find(kParameterOpen, gt + 1), end);
    AddParameter(key, body.substr(gt + 1, close - gt - 1));
    pos = close;
  }
  FinishCall(SerializeArguments(call_args_), out);
  return true;
}

void ReplyParser::StartCall(const std::string& name, ParsedDelta& out) {
  ToolCallDelta d;
  d.index = next_index_;
  uint64_t h = SplitMix64(options_.call_id_seed ^ SplitMix64(static_cast<uint64_t>(next_index_)));
  char id[40];
  std::snprintf(id, sizeof(id), "call_%016llx%08llx", static_cast<unsigned long long>(h),
                static_cast<unsigned long long>(SplitMix64(h) >> 32));
  d.id = id;
  d.name = name;
  out.tool_calls.push_back(std::move(d));
  call_function_ = name;
  call_args_ = nlohmann::ordered_json::object();
}

void ReplyParser::FinishCall(const std::string& arguments, ParsedDelta& out) {
  ToolCallDelta d;
  d.index = next_index_++;
  d.arguments = arguments;
  out.tool_calls.push_back(std::move(d));
}

void ReplyParser::AddParameter(const std::string& name, std::string value) {
  if (!value.empty() && value.front() == '\n') value.erase(0, 1);
  if (!value.empty() && value.back() == '\n') value.pop_back();
  const nlohmann::ordered_json* schema = nullptr;
  const auto& tools = options_.tools_schema;
  if (tools.is_array()) {
    for (const auto& tool : tools) {
      const auto& fn = tool.contains("function") ? tool["function"] : tool;
      if (!fn.is_object() || fn.value("name", "") != call_function_) continue;
      if (fn.contains("parameters") && fn["parameters"].is_object() &&
          fn["parameters"].contains("properties") && fn["parameters"]["properties"].is_object() &&
          fn["parameters"]["properties"].contains(name)) {
        schema = &fn["parameters"]["properties"][name];
      }
      break;
    }
  }
  static const nlohmann::ordered_json kNoSchema;
  call_args_[name] = TypeParameterValue(value, schema ? *schema : kNoSchema);
}

void AccumulateDelta(const ParsedDelta& delta, ParsedReply& reply) {
  reply.reasoning_content += delta.reasoning_content;
  reply.content += delta.content;
  for (const ToolCallDelta& d : delta.tool_calls) {
    if (d.index == static_cast<int>(reply.tool_calls.size())) {
      reply.tool_calls.push_back({d.id, d.name, d.arguments});
    } else if (d.index >= 0 && d.index < static_cast<int>(reply.tool_calls.size())) {
      reply.tool_calls[d.index].arguments += d.arguments;
    }
  }
}

ParsedReply ParseReply(const ParserOptions& options, std::string_view text) {
  ReplyParser parser(options);
  ParsedReply reply;
  AccumulateDelta(parser.Push(text), reply);
  AccumulateDelta(parser.Finish(), reply);
  return reply;
}

bool PromptOpensThink(std::string_view prompt) {
  while (!prompt.empty() && IsWs(prompt.back())) prompt.remove_suffix(1);
  return prompt.size() >= kThinkOpen.size() &&
         prompt.substr(prompt.size() - kThinkOpen.size()) == kThinkOpen;
}

}  // namespace moeserve::chat
