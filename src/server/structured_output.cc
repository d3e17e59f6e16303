#include "server/structured_output.h"

#include <set>

#include "engine/sampling_params.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "server/api_error.h"
#include "server/tool_call_grammar.h"

namespace moeserve::server {
namespace {

using Kind = ConstraintSpec::Kind;

// The reply parsers' tags: ordinary text in a tool-call grammar (chat_replies.cc keeps them in
// the detokenized text for the same reason).
const std::set<std::string>& ParserTags() {
  static const std::set<std::string> tags = {
      "<think>",     "</think>",    "<minimax:tool_call>", "</minimax:tool_call>",
      "<tool_call>", "</tool_call>"};
  return tags;
}

// A JSON Schema given as an object, a boolean or JSON text (vLLM accepts a string).
Json SchemaValue(const Json& v, const std::string& field) {
  if (v.is_object() || v.is_boolean()) return v;
  if (v.is_string()) {
    Json parsed = Json::parse(v.get<std::string>(), nullptr, false);
    if (parsed.is_discarded() || !(parsed.is_object() || parsed.is_boolean()))
      throw BadRequest("'" + field + "' is not a JSON Schema: malformed JSON text", field);
    return parsed;
  }
  throw BadRequest("'" + field + "' must be a JSON Schema object", field);
}

std::string StringValue(const Json& v, const std::string& field) {
  if (!v.is_string()) throw BadRequest("'" + field + "' must be a string", field);
  return v.get<std::string>();
}

std::vector<std::string> Choices(const Json& v, const std::string& field) {
  if (!v.is_array() || v.empty())
    throw BadRequest("'" + field + "' must be a non-empty list of strings", field);
  std::vector<std::string> out;
  for (const Json& c : v) {
    if (!c.is_string())
      throw BadRequest("'" + field + "' must be a non-empty list of strings", field);
    out.push_back(c.get<std::string>());
  }
  return out;
}

// Collects the constraints a body states; more than one is an error.
class Collector {
 public:
  void Add(ConstraintSpec spec) {
    if (!spec_.empty())
      throw BadRequest("only one structured output constraint per request: '" + spec_.field +
                           "' and '" + spec.field + "' were both given",
                       spec.field);
    spec_ = std::move(spec);
  }
  ConstraintSpec Take() { return std::move(spec_); }

 private:
  ConstraintSpec spec_;
};

ConstraintSpec Spec(Kind kind, std::string field) {
  ConstraintSpec s;
  s.kind = kind;
  s.field = std::move(field);
  return s;
}

ConstraintSpec JsonSpec(const Json& schema, std::string field) {
  ConstraintSpec s = Spec(Kind::kJsonSchema, field);
  s.schema = SchemaValue(schema, field);
  return s;
}

void ReadResponseFormat(const Json& rf, Collector& out) {
  if (rf.is_null()) return;
  const std::string field = "response_format";
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
    throw BadRequest("'response_format' must be an object with a string 'type'", field);
  const std::string type = rf["type"].get<std::string>();
  if (type == "text") return;
  if (type == "json_object") {
    // llama.cpp's form carries a schema beside the type.
    if (rf.contains("schema") && !rf["schema"].is_null())
      return out.Add(JsonSpec(rf["schema"], field));
    return out.Add(Spec(Kind::kJsonObject, field));
  }
  if (type == "json_schema") {
    if (rf.contains("json_schema") && rf["json_schema"].is_object()) {
      const Json& js = rf["json_schema"];
      if (!js.contains("schema") || js["schema"].is_null())
        throw BadRequest("'response_format.json_schema' needs a 'schema'", field);
      if (js.contains("strict") && !js["strict"].is_null() && !js["strict"].is_boolean())
        throw BadRequest("'response_format.json_schema.strict' must be a boolean", field);
      return out.Add(JsonSpec(js["schema"], field));
    }
    if (rf.contains("schema") && !rf["schema"].is_null())  // llama.cpp
      return out.Add(JsonSpec(rf["schema"], field));
    throw BadRequest("'response_format' of type json_schema needs 'json_schema' with a 'schema'",
                     field);
  }
  throw BadRequest(
      "unknown 'response_format' type '" + type + "' (supported: text, json_object, json_schema)",
      field);
}

void ReadStructuredOutputs(const Json& so, Collector& out) {
  if (so.is_null()) return;
  if (!so.is_object())
    throw BadRequest("'structured_outputs' must be an object", "structured_outputs");
  const bool compact = so.value("disable_any_whitespace", false);
  for (const auto& [key, v] : so.items()) {
    const std::string field = "structured_outputs." + key;
    if (v.is_null()) continue;
    if (key == "json") {
      ConstraintSpec s = JsonSpec(v, field);
      s.compact = compact;
      out.Add(std::move(s));
    } else if (key == "regex") {
      ConstraintSpec s = Spec(Kind::kRegex, field);
      s.text = StringValue(v, field);
      out.Add(std::move(s));
    } else if (key == "choice") {
      ConstraintSpec s = Spec(Kind::kChoice, field);
      s.choices = Choices(v, field);
      out.Add(std::move(s));
    } else if (key == "grammar") {
      ConstraintSpec s = Spec(Kind::kGrammar, field);
      s.text = StringValue(v, field);
      out.Add(std::move(s));
    } else if (key == "json_object") {
      if (!v.is_boolean()) throw BadRequest("'" + field + "' must be a boolean", field);
      if (v.get<bool>()) {
        ConstraintSpec s = Spec(Kind::kJsonObject, field);
        s.compact = compact;
        out.Add(std::move(s));
      }
    } else if (key == "disable_any_whitespace" || key == "disable_fallback" ||
               key == "disable_additional_properties" || key == "backend") {
      // Options: whitespace is honoured; there is one backend and no fallback to change;
      // additional properties are already refused unless the schema allows them.
    } else {
      throw BadRequest("'" + field + "' is not supported", field);
    }
  }
}

void ReadGuided(const Json& body, Collector& out) {
  auto field = [&](const char* name) -> const Json* {
    auto it = body.find(name);
    return it == body.end() || it->is_null() ? nullptr : &*it;
  };
  const bool compact = false;
  if (const Json* v = field("guided_json")) {
    ConstraintSpec s = JsonSpec(*v, "guided_json");
    s.compact = compact;
    out.Add(std::move(s));
  }
  if (const Json* v = field("guided_regex")) {
    ConstraintSpec s = Spec(Kind::kRegex, "guided_regex");
    s.text = StringValue(*v, "guided_regex");
    out.Add(std::move(s));
  }
  if (const Json* v = field("guided_choice")) {
    ConstraintSpec s = Spec(Kind::kChoice, "guided_choice");
    s.choices = Choices(*v, "guided_choice");
    out.Add(std::move(s));
  }
  if (const Json* v = field("guided_grammar")) {
    ConstraintSpec s = Spec(Kind::kGrammar, "guided_grammar");
    s.text = StringValue(*v, "guided_grammar");
    out.Add(std::move(s));
  }
  if (field("guided_whitespace_pattern"))
    throw BadRequest("'guided_whitespace_pattern' is not supported", "guided_whitespace_pattern");
  (void)field("guided_decoding_backend");  // one backend: accepted and ignored
  // llama.cpp
  if (const Json* v = field("grammar")) {
    ConstraintSpec s = Spec(Kind::kGrammar, "grammar");
    s.text = StringValue(*v, "grammar");
    out.Add(std::move(s));
  }
  if (const Json* v = field("json_schema")) out.Add(JsonSpec(*v, "json_schema"));
}

grammar::GrammarAst BuildAst(const ConstraintSpec& spec) {
  const grammar::JsonSchemaOptions json_options{.compact = spec.compact};
  switch (spec.kind) {
    case Kind::kJsonSchema:
      return grammar::JsonSchemaValueToGrammar(spec.schema, json_options);
    case Kind::kJsonObject:
      return grammar::JsonObjectGrammar(json_options);
    case Kind::kRegex:
      return grammar::RegexToGrammar(spec.text);
    case Kind::kChoice:
      return grammar::ChoiceToGrammar(spec.choices);
    case Kind::kGrammar:
      return grammar::ParseGbnf(spec.text);
    case Kind::kToolCalls:
      return ToolCallGrammar({.tools = spec.tools,
                              .format = spec.tool_format,
                              .only_function = spec.only_function,
                              .single_call = spec.single_call});
    case Kind::kNone:
      break;
  }
  throw grammar::GrammarError("no constraint");
}

}  // namespace

const std::initializer_list<std::string_view> kConstraintFields = {
    "response_format", "structured_outputs",      "guided_json", "guided_regex", "guided_choice",
    "guided_grammar",  "guided_decoding_backend", "grammar",     "json_schema"};

std::string ConstraintSpec::CacheKey() const {
  Json key = {{"kind", static_cast<int>(kind)}, {"compact", compact}};
  switch (kind) {
    case Kind::kJsonSchema:
      key["schema"] = schema;  // ordered: property order is part of the grammar
      break;
    case Kind::kRegex:
    case Kind::kGrammar:
      key["text"] = text;
      break;
    case Kind::kChoice:
      key["choices"] = choices;
      break;
    case Kind::kToolCalls:
      key["tools"] = tools;
      key["format"] = static_cast<int>(tool_format);
      key["only"] = only_function;
      key["single"] = single_call;
      break;
    case Kind::kJsonObject:
    case Kind::kNone:
      break;
  }
  return DumpJson(key);
}

ConstraintSpec ParseConstraint(const Json& body) {
  Collector out;
  if (auto rf = body.find("response_format"); rf != body.end()) ReadResponseFormat(*rf, out);
  if (auto so = body.find("structured_outputs"); so != body.end()) ReadStructuredOutputs(*so, out);
  ReadGuided(body, out);
  return out.Take();
}

StructuredOutputs::StructuredOutputs(const tokenizer::Tokenizer& tokenizer, std::string eos_token,
                                     size_t cache_capacity)
    : tokenizer_(tokenizer), eos_token_(std::move(eos_token)), capacity_(cache_capacity) {}

std::shared_ptr<const grammar::Vocabulary> StructuredOutputs::BuildVocabulary(
    bool tags_ordinary) const {
  const size_t n = tokenizer_.VocabSize();
  std::vector<std::string> bytes(n);
  std::vector<bool> special(n, false);
  for (size_t id = 0; id < n; ++id) {
    const int32_t i = static_cast<int32_t>(id);
    bytes[id] = tokenizer_.TokenBytes(i);
    special[id] = tokenizer_.IsSpecial(i) && !(tags_ordinary && ParserTags().count(bytes[id]));
  }
  std::vector<int32_t> stops;
  if (auto eos = tokenizer_.EosId()) stops.push_back(*eos);
  if (!eos_token_.empty())
    if (auto id = tokenizer_.TokenToId(eos_token_);
        id && std::find(stops.begin(), stops.end(), *id) == stops.end())
      stops.push_back(*id);
  return std::make_shared<const grammar::Vocabulary>(std::move(bytes), std::move(special),
                                                     std::move(stops));
}

grammar::GrammarCache& StructuredOutputs::cache(bool tags_ordinary) {
  std::lock_guard lock(mu_);
  auto& c = tags_ordinary ? cache_tags_ordinary_ : cache_;
  if (!c)  // once per model: cheap next to a compile
    c = std::make_unique<grammar::GrammarCache>(BuildVocabulary(tags_ordinary), capacity_);
  return *c;
}

std::shared_ptr<const grammar::Vocabulary> StructuredOutputs::vocabulary(bool tags_ordinary) {
  return cache(tags_ordinary).vocabulary();
}

std::shared_ptr<const grammar::CompiledGrammar> StructuredOutputs::Compile(
    const ConstraintSpec& spec) {
  try {
    return cache(spec.kind == Kind::kToolCalls).Get(spec.CacheKey(), [&] {
      return BuildAst(spec);
    });
  } catch (const grammar::GrammarError& e) {
    throw BadRequest(std::string("'") + spec.field + "': " + e.what(), spec.field);
  } catch (const nlohmann::json::exception& e) {  // a keyword of the wrong JSON type
    throw BadRequest(std::string("'") + spec.field + "': " + e.what(), spec.field);
  }
}

StructuredOutputs::CacheStats StructuredOutputs::cache_stats() const {
  std::lock_guard lock(mu_);
  CacheStats total;
  for (const auto* c : {cache_.get(), cache_tags_ordinary_.get()}) {
    if (!c) continue;
    const grammar::GrammarCache::Stats s = c->stats();
    total.hits += s.hits;
    total.misses += s.misses;
    total.size += s.size;
  }
  return total;
}

void ApplyConstraint(const ConstraintSpec& spec, bool reasoning_opened, StructuredOutputs& outputs,
                     engine::SamplingParams& params) {
  if (spec.empty()) return;
  params.grammar = outputs.Compile(spec);
  params.grammar_start_after = reasoning_opened ? "</think>" : "";
}

}  // namespace moeserve::server
