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

  GrammarAst Compile(const Json& schema);
  GrammarAst CompileAnyObject();

 private:
  template <typename... Args>
  [[noreturn]] static void Fail(const Args&... args) {
    throw GrammarError(detail::Concat(args...));
  }

  int NewRule(std::string base) {
    for (char& c : base)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '-';
    std::string name = base;
    for (int i = 2; names_.count(name); ++i) name = base + "-" + std::to_string(i);
    names_.insert(name);
    ast_.rules.push_back({name, Expr::Empty()});
    return static_cast<int>(ast_.rules.size()) - 1;
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
  int Primitive(const std::string& name);

  // JSON text of a constant (compact, as the model should write it).

  const Json& Resolve(const std::string& ref, const std::string& path);
  Expr Schema(const Json& s, const std::string& path);
  Expr SchemaWithoutNullable(const Json& s, const std::string& path);
  // anyOf / oneOf: one alternative per part, each with the sibling keywords merged in.
  Expr Alternatives(const Json& s, const char* key, const std::string& path);
  Expr Typed(const Json& s, const std::string& type, const std::string& path);
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
  std::set<std::string> names_;  // rule names in use
};

}  // namespace moeserve::grammar::json
