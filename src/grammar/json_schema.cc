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
