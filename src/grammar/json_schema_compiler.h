// The JSON Schema compiler's class (internal to the grammar layer): json_schema.cc holds the
// dispatch over keywords, json_schema_types.cc the per-type rules.
#pragma once

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/json_pieces.h"
#include "grammar/json_schema.h"

namespace moeserve::grammar::json {

using Json = nlohmann::ordered_json;

inline const std::set<std::string> kAnnotations = {
    "title",    "description", "default",  "examples",  "$schema", "$id",
    "$comment", "deprecated",  "readOnly", "writeOnly", "$defs",   "definitions"};
inline const std::set<std::string> kKeywords = {
    "type",    "enum",        "const",    "properties", "required",         "additionalProperties",
    "items",   "prefixItems", "minItems", "maxItems",   "minLength",        "maxLength",
    "pattern", "format",      "minimum",  "maximum",    "exclusiveMinimum", "exclusiveMaximum",
    "anyOf",   "oneOf",       "allOf",    "$ref",       "nullable"};

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const JsonSchemaOptions& options)
      : root_(root), options_(options) {}

  GrammarAst Compile(const Json& schema) {
    ast_.root = NewRule("root");
    ast_.rules[ast_.root].body = Schema(schema, "$");
    return std::move(ast_);
  }

  GrammarAst CompileAnyObject() {
    ast_.root = NewRule("root");
    ast_.rules[ast_.root].body = Expr::Rule(Primitive("object"));
    return std::move(ast_);
  }

 private:
  template <typename... Args>
  [[noreturn]] static void Fail(const Args&... args) {
    throw GrammarError(detail::Concat(args...));
  }

  int NewRule(std::string base) {
    for (char& c : base)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '-';
    std::string name = base;
    for (int i = 2; ast_.FindRule(name) >= 0; ++i) name = base + "-" + std::to_string(i);
    return ast_.RuleIndex(name);
  }
  int Define(const std::string& base, Expr body) {
    const int r = NewRule(base);
    ast_.rules[r].body = std::move(body);
    return r;
  }
  Expr Ws() { return options_.compact ? Expr::Empty() : Expr::Rule(Primitive("ws")); }
  static Expr Lit(const std::string& s) { return Expr::Literal(s); }
  static Expr Star(Expr e) { return Expr::Repeat(std::move(e), 0, kUnbounded); }
  static Expr Opt(Expr e) { return Expr::Repeat(std::move(e), 0, 1); }

  // Shared rules for unconstrained JSON, defined on first use.
  int Primitive(const std::string& name) {
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
      const Expr digits = Expr::Repeat(Expr::Class({{'0', '9'}}), 1, kUnbounded);
      body = Expr::Seq({Opt(Lit("-")),
                        Expr::Alt({Lit("0"), Expr::Seq({Expr::Class({{'1', '9'}}),
                                                        Star(Expr::Class({{'0', '9'}}))})}),
                        Opt(Expr::Seq({Lit("."), digits})),
                        Opt(Expr::Seq({Expr::Class({{'e', 'e'}, {'E', 'E'}}),
                                       Opt(Expr::Class({{'+', '+'}, {'-', '-'}})), digits}))});
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
      body =
          Expr::Seq({Lit("["), Ws(),
                     Opt(Expr::Seq({value, Star(Expr::Seq({Ws(), Lit(","), Ws(), value})), Ws()})),
                     Lit("]")});
    }
    ast_.rules[r].body = std::move(body);
    return r;
  }

  // JSON text of a constant (compact, as the model should write it).
  static Expr Constant(const Json& v) { return Lit(v.dump(-1, ' ', false)); }

  const Json& Resolve(const std::string& ref, const std::string& path) {
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

  Expr Schema(const Json& s, const std::string& path) {
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

  Expr SchemaWithoutNullable(const Json& s, const std::string& path) {
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
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      std::vector<Expr> alts;
      const Json& parts = s[key];
      if (!parts.is_array() || parts.empty())
        Fail("'", key, "' at ", path, " must be a non-empty array");
      for (size_t i = 0; i < parts.size(); ++i)
        alts.push_back(Schema(parts[i], path + "." + key + "[" + std::to_string(i) + "]"));
      return Expr::Alt(std::move(alts));
    }
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

  Expr Typed(const Json& s, const std::string& type, const std::string& path) {
    if (type == "object") return Object(s, path);
    if (type == "array") return Array(s, path);
    if (type == "string") return String(s, path);
    if (type == "integer") return Integer(s, path);
    if (type == "number") return Number(s, path);
    if (type == "boolean" || type == "null") return Expr::Rule(Primitive(type));
    Fail("unknown type '", type, "' at ", path);
  }

  Json MergeAllOf(const Json& s, const std::string& path);
  Expr Object(const Json& s, const std::string& path);
  Expr Array(const Json& s, const std::string& path);
  Expr String(const Json& s, const std::string& path);
  Expr Integer(const Json& s, const std::string& path);
  Expr Number(const Json& s, const std::string& path);

  const Json& root_;
  JsonSchemaOptions options_;
  GrammarAst ast_;
  std::unordered_map<std::string, int> primitives_;
  std::unordered_map<std::string, int> refs_;
};

}  // namespace moeserve::grammar::json
