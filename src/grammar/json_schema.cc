// JSON Schema -> grammar. Every object property, array item, $ref target and constrained string
// becomes its own rule: repeated uses then cost a call edge instead of a copy of the automaton,
// and token-mask cache entries are shared. Strings and numbers stay inside one rule each, so a
// token that stays inside a string is classified once per state (compiled_grammar.h).
#include "grammar/json_schema.h"

#include "grammar/json_schema_compiler.h"

namespace moeserve::grammar {
namespace {

using json::Json;
using json::SchemaCompiler;

// JSON text of a constant (compact, as the model should write it).
Expr Constant(const Json& v) {
  return Expr::Literal(v.dump(-1, ' ', false));
}

// nlohmann's own errors (a "type" that is not a string...) become GrammarErrors.
template <typename F>
GrammarAst Guarded(F&& f) {
  try {
    return f();
  } catch (const nlohmann::json::exception& e) {
    throw GrammarError(detail::Concat("invalid JSON schema: ", e.what()));
  }
}

}  // namespace

namespace json {

GrammarAst SchemaCompiler::Compile(const Json& schema) {
  ast_.root = NewRule("root");
  ast_.rules[ast_.root].body = Schema(schema, "$");
  return std::move(ast_);
}

GrammarAst SchemaCompiler::CompileAnyObject() {
  ast_.root = NewRule("root");
  ast_.rules[ast_.root].body = Expr::Rule(Primitive("object"));
  return std::move(ast_);
}

int SchemaCompiler::Primitive(const std::string& name) {
  if (auto it = primitives_.find(name); it != primitives_.end()) return it->second;
  const int r = NewRule(name);
  primitives_[name] = r;
  Expr body;
  if (name == "ws") {
    body = Opt(Expr::Alt(
        {Lit(" "),
         Expr::Seq({Lit("\n"), Expr::Repeat(Expr::Class({{' ', ' '}, {'\t', '\t'}}), 0, 40)})}));
  } else if (name == "string") {
    body = Expr::Seq({Lit("\""), Star(json::JsonStringChar()), Lit("\"")});
  } else if (name == "number") {
    body = json::AnyNumber();
  } else if (name == "integer") {
    body = json::IntegerRange(std::nullopt, std::nullopt);
  } else if (name == "boolean") {
    body = Expr::Alt({Lit("true"), Lit("false")});
  } else if (name == "null") {
    body = Lit("null");
  } else if (name == "value") {
    std::vector<Expr> alts;
    for (const char* p : {"object", "array", "string", "number", "boolean", "null"})
      alts.push_back(Expr::Rule(Primitive(p)));
    body = Expr::Alt(std::move(alts));
  } else if (name == "object") {
    const Expr pair = Expr::Seq(
        {Expr::Rule(Primitive("string")), Ws(), Lit(":"), Ws(), Expr::Rule(Primitive("value"))});
    body = Expr::Seq({Lit("{"), Ws(),
                      Opt(Expr::Seq({pair, Star(Expr::Seq({Ws(), Lit(","), Ws(), pair})), Ws()})),
                      Lit("}")});
  } else if (name == "array") {
    const Expr value = Expr::Rule(Primitive("value"));
    body = Expr::Seq({Lit("["), Ws(),
                      Opt(Expr::Seq({value, Star(Expr::Seq({Ws(), Lit(","), Ws(), value})), Ws()})),
                      Lit("]")});
  }
  ast_.rules[r].body = std::move(body);
  return r;
}

const Json& SchemaCompiler::Resolve(const std::string& ref, const std::string& path) {
  if (ref.empty() || ref[0] != '#')
    Fail("unsupported $ref '", ref, "' at ", path, " (only local references '#...')");
  const Json* node = &root_;
  try {
    node = &root_.at(Json::json_pointer(ref.substr(1)));
  } catch (const std::exception&) {
    Fail("$ref '", ref, "' at ", path, " points to nothing");
  }
  return *node;
}

Expr SchemaCompiler::Schema(const Json& s, const std::string& path) {
  if (s.is_boolean()) {
    if (!s.get<bool>()) Fail("the schema at ", path, " is false: nothing matches it");
    return Expr::Rule(Primitive("value"));
  }
  if (!s.is_object()) Fail("the schema at ", path, " is not an object or boolean");
  for (const auto& [key, value] : s.items())
    if (!kKeywords.count(key) && !kAnnotations.count(key) && key.rfind("x-", 0) != 0)
      Fail("unsupported JSON Schema keyword '", key, "' at ", path);
  Expr e = SchemaWithoutNullable(s, path);
  if (s.value("nullable", false)) e = Expr::Alt({std::move(e), Expr::Rule(Primitive("null"))});
  return e;
}

Expr SchemaCompiler::SchemaWithoutNullable(const Json& s, const std::string& path) {
  if (s.contains("$ref")) {
    const std::string ref = s["$ref"].get<std::string>();
    auto it = refs_.find(ref);
    if (it == refs_.end()) {
      const int r = NewRule("ref");
      refs_[ref] = r;
      ast_.rules[r].body = Schema(Resolve(ref, path), ref);
      it = refs_.find(ref);
    }
    return Expr::Rule(it->second);
  }
  if (s.contains("allOf")) return Schema(MergeAllOf(s, path), path + ".allOf");
  for (const char* key : {"anyOf", "oneOf"})
    if (s.contains(key)) return Alternatives(s, key, path);
  if (s.contains("const")) return Constant(s["const"]);
  if (s.contains("enum")) {
    std::vector<Expr> alts;
    for (const Json& v : s["enum"]) alts.push_back(Constant(v));
    if (alts.empty()) Fail("'enum' at ", path, " is empty: nothing matches it");
    return Expr::Alt(std::move(alts));
  }
  std::vector<std::string> types;
  if (s.contains("type")) {
    if (s["type"].is_array()) {
      for (const Json& t : s["type"]) types.push_back(t.get<std::string>());
    } else {
      types.push_back(s["type"].get<std::string>());
    }
  } else if (s.contains("properties") || s.contains("additionalProperties") ||
             s.contains("required")) {
    types = {"object"};
  } else if (s.contains("items") || s.contains("prefixItems")) {
    types = {"array"};
  } else if (s.contains("pattern") || s.contains("format") || s.contains("minLength")) {
    types = {"string"};
  } else {
    return Expr::Rule(Primitive("value"));
  }
  std::vector<Expr> alts;
  for (const std::string& t : types) alts.push_back(Typed(s, t, path));
  return Expr::Alt(std::move(alts));
}

Expr SchemaCompiler::Typed(const Json& s, const std::string& type, const std::string& path) {
  if (type == "object") return Object(s, path);
  if (type == "array") return Array(s, path);
  if (type == "string") return String(s, path);
  if (type == "integer") return Integer(s, path);
  if (type == "number") return Number(s, path);
  if (type == "boolean" || type == "null") return Expr::Rule(Primitive(type));
  Fail("unknown type '", type, "' at ", path);
}

Expr SchemaCompiler::Alternatives(const Json& s, const char* key, const std::string& path) {
  const Json& parts = s[key];
  if (!parts.is_array() || parts.empty())
    Fail("'", key, "' at ", path, " must be a non-empty array");
  // A and (B or C) == (A and B) or (A and C): the siblings join every alternative.
  Json siblings = Json::object();
  for (const auto& [k, v] : s.items())
    if (k != key && k != "nullable" && !kAnnotations.count(k)) siblings[k] = v;
  std::vector<Expr> alts;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string at = path + "." + key + "[" + std::to_string(i) + "]";
    if (siblings.empty()) {
      alts.push_back(Schema(parts[i], at));
    } else {
      const Json both = {{"allOf", Json::array({siblings, parts[i]})}};
      alts.push_back(Schema(MergeAllOf(both, at), at));
    }
  }
  return Expr::Alt(std::move(alts));
}

}  // namespace json

GrammarAst JsonSchemaValueToGrammar(const Json& schema, const JsonSchemaOptions& options) {
  return Guarded([&] { return SchemaCompiler(schema, options).Compile(schema); });
}

GrammarAst JsonSchemaToGrammar(std::string_view schema, const JsonSchemaOptions& options) {
  Json parsed;
  try {
    parsed = Json::parse(schema);
  } catch (const std::exception& e) {
    throw GrammarError(detail::Concat("the JSON schema is not valid JSON: ", e.what()));
  }
  return JsonSchemaValueToGrammar(parsed, options);
}

GrammarAst JsonObjectGrammar(const JsonSchemaOptions& options) {
  const Json empty = Json::object();
  return Guarded([&] { return SchemaCompiler(empty, options).CompileAnyObject(); });
}

}  // namespace moeserve::grammar
