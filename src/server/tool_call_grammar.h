// The grammar of a reply that is nothing but tool calls, in the model's own syntax, with every
// argument typed by its tool's JSON schema: what tool_choice "required", a named tool_choice and
// parallel_tool_calls false compile to, so the reply parser (chat/reply_parser.h) always finds
// calls whose arguments parse and validate.
//
//  - MiniMax-M2 XML (kMiniMaxXml), as the chat template shows it to the model:
//      <minimax:tool_call>\n<invoke name="f">\n<parameter name="k">v</parameter>\n...</invoke>\n
//      ...</minimax:tool_call>
//    Parameters come in the order the schema lists them, required ones always, optional ones
//    may be left out. The parser types a value by the schema's "type" (reply_parser.h), so a
//    value is written as that type's parser expects: integer, number, boolean, object and array
//    values as JSON texts of the property's schema (JSON Schema front end); string values raw,
//    on one line, without '<' (which would end the value early) and never "null" in any case
//    (the parser reads that as null), with their enum / const / format / pattern / length
//    constraints; a schema without a type (or an anyOf of types) is a string to the parser and
//    is only accepted when it allows strings.
//  - Qwen3 JSON (kQwen3Json): <tool_call>\n{"name": "f", "arguments": ARGS}\n</tool_call>, calls
//    separated by "\n"; ARGS is the JSON text of the function's parameters schema.
//
// Calls: one or more (several separated as the format does), or exactly one when `single_call`;
// only calls to `only_function` when it is set. Nothing comes before the first call or after the
// last (so the reply's content is empty, as vLLM returns it).
//
// Every tool's parameters schema is also checked with the JSON Schema front end, so an
// unsupported keyword is a GrammarError naming the tool and the keyword's path.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "chat/reply_parser.h"
#include "grammar/ast.h"

namespace moeserve::server {

struct ToolCallConstraint {
  nlohmann::ordered_json tools;  // OpenAI function tools, as sent
  chat::ToolCallFormat format = chat::ToolCallFormat::kNone;
  std::string only_function;  // "" = any of the tools
  bool single_call = false;
};

// Throws grammar::GrammarError for an unsupported schema or format.
grammar::GrammarAst ToolCallGrammar(const ToolCallConstraint& constraint);

// Appends the rules of `src` to `dst` (renamed with `prefix` so names stay unique) and returns
// the index of src's root rule in dst.
int EmbedGrammar(grammar::GrammarAst& dst, const grammar::GrammarAst& src,
                 const std::string& prefix);

}  // namespace moeserve::server
