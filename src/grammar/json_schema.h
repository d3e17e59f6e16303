// JSON Schema (and OpenAI's json_object) compiled to a grammar of the JSON texts that validate.
//
// Supported: type (one or an array; "integer", "number", "string", "boolean", "null", "object",
// "array"), nullable (OpenAPI), enum, const, properties (generated in the order written),
// required, additionalProperties (false / true / a schema), items (a schema, false, or an array:
// the draft 4-7 tuple form), prefixItems, minItems, maxItems, minLength, maxLength, pattern (a
// regex.h pattern, matched against the decoded string: unanchored sides may hold any text), format
// (date, time, date-time, uuid, email, ipv4; other formats are annotations and constrain nothing),
// minimum / maximum / exclusiveMinimum / exclusiveMaximum (draft 4 booleans too) on integers, and
// on numbers when the bounds are integers (a bounded number is written without exponent),
// anyOf and oneOf (as alternatives; oneOf's exclusivity is not enforced), allOf
// (merged: properties, required and the other keywords of every part), $ref to "#", "#/$defs/..",
// "#/definitions/.." (recursion included), and the annotations title, description, default,
// examples, $schema, $id, $comment, deprecated, readOnly, writeOnly, x-*.
// Any other keyword is an error naming it and its JSON path, e.g.
//   "unsupported JSON Schema keyword 'patternProperties' at $.properties.x"
//
// Policies (vLLM with xgrammar behaves the same way unless noted):
//  - An object without additionalProperties allows no other properties (xgrammar's default
//    strict_mode, which vLLM uses), and an array with prefixItems but no items allows no other
//    items. `strict: true` (OpenAI) therefore changes nothing: those are already its semantics;
//    its extra demands on the schema (every property required) are not enforced.
//  - Optional properties may be left out but never reordered.
//  - Whitespace: between tokens, nothing, one space, or one newline followed by up to 40 spaces
//    or tabs (enough for pretty-printed JSON; a bound, so a model cannot pad forever).
//    `compact` allows none, as vLLM's disable_any_whitespace / xgrammar's separators do.
//  - Digit runs are bounded (json_pieces.h): integer parts up to 19 digits, fractions up to 16,
//    exponents up to 3; an email's local part is at most 64 bytes. A model cannot run on.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "grammar/ast.h"

namespace moeserve::grammar {

struct JsonSchemaOptions {
  bool compact = false;  // no whitespace between tokens
};

// `schema` is JSON text (a schema object or true / false). Throws GrammarError for malformed
// JSON, unsupported keywords (with their path) or schemas nothing can satisfy.
GrammarAst JsonSchemaToGrammar(std::string_view schema, const JsonSchemaOptions& options);
GrammarAst JsonSchemaValueToGrammar(const nlohmann::ordered_json& schema,
                                    const JsonSchemaOptions& options);

// Any JSON object (response_format {"type": "json_object"}).
GrammarAst JsonObjectGrammar(const JsonSchemaOptions& options);

}  // namespace moeserve::grammar
