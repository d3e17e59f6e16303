#include "server/tool_call_grammar.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "grammar/json_pieces.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace moeserve::server {
namespace {

using grammar::CodepointRange;
using grammar::Expr;
using grammar::GrammarAst;
using grammar::GrammarError;
using grammar::kUnbounded;
using Json = nlohmann::ordered_json;

void Remap(Expr& e, int offset) {
  if (e.kind == Expr::Kind::kRule) e.rule += offset;
  for (Expr& c : e.children) Remap(c, offset);
}

Expr Lit(std::string s) {
  return Expr::Literal(std::move(s));
}
Expr Opt(Expr e) {
  return Expr::Repeat(std::move(e), 0, 1);
}

// One character of a raw MiniMax string value: '<' would start a closing tag, and newlines and
// carriage returns at the value's edges are the format's (the parser drops them).
constexpr CodepointRange kRawExcluded[] = {{'\n', '\n'}, {'\r', '\r'}, {'<', '<'}};

Expr RawChar(std::vector<CodepointRange> also_excluded = {}) {
  std::vector<CodepointRange> ranges(std::begin(kRawExcluded), std::end(kRawExcluded));
  ranges.insert(ranges.end(), also_excluded.begin(), also_excluded.end());
  return Expr::Class(std::move(ranges), /*negated=*/true);
}

bool IsNullWord(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s == "null";
}

// Raw strings of [lo, hi] code points (hi may be kUnbounded) other than "null" in any case, which
// the parser would read as null: the complement of one word, branch by branch along its letters.
Expr RawStringNotNull(int lo, int hi) {
  static constexpr char kWord[] = "null";
  auto tail = [&](int consumed, int at_least) -> std::optional<Expr> {
    const int min = std::max(at_least, lo - consumed);
    const int max = hi == kUnbounded ? kUnbounded : hi - consumed;
    if (max != kUnbounded && max < min) return std::nullopt;
    return Expr::Repeat(RawChar(), min, max);
  };
  // The strings whose first `depth` characters spell the start of "null".
  std::function<std::optional<Expr>(int)> from = [&](int depth) -> std::optional<Expr> {
    std::vector<Expr> alts;
    if (depth == 4) {
      if (auto t = tail(4, 1)) alts.push_back(std::move(*t));
    } else {
      if (depth >= lo && (hi == kUnbounded || depth <= hi)) alts.push_back(Expr::Empty());
      const char c = kWord[depth];
      const char upper = static_cast<char>(std::toupper(c));
      if (auto t = tail(depth + 1, 0))
        alts.push_back(
            Expr::Seq({RawChar({{uint32_t(c), uint32_t(c)}, {uint32_t(upper), uint32_t(upper)}}),
                       std::move(*t)}));
      if (hi == kUnbounded || hi > depth)
        if (auto deeper = from(depth + 1))
          alts.push_back(Expr::Seq(
              {Expr::Class({{uint32_t(c), uint32_t(c)}, {uint32_t(upper), uint32_t(upper)}}),
               std::move(*deeper)}));
    }
    if (alts.empty()) return std::nullopt;
    return Expr::Alt(std::move(alts));
  };
  std::optional<Expr> e = from(0);
  if (!e)
    throw GrammarError("no string fits minLength " + std::to_string(lo) + " / maxLength " +
                       std::to_string(hi));
  return std::move(*e);
}

// `schema` with $ref to "#/$defs/..", "#/definitions/.." followed (for reading its type).
const Json& Resolve(const Json& schema, const Json& root) {
  const Json* s = &schema;
  for (int depth = 0; depth < 32 && s->is_object() && s->contains("$ref"); ++depth) {
    const Json& ref = (*s)["$ref"];
    if (!ref.is_string()) break;
    const std::string r = ref.get<std::string>();
    const Json* next = nullptr;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string p = prefix;
      const std::string section = p.substr(2, p.size() - 3);
      if (r.rfind(p, 0) == 0 && root.contains(section) &&
          root[section].contains(r.substr(p.size())))
        next = &root[section][r.substr(p.size())];
    }
    if (!next) break;
    s = next;
  }
  return *s;
}

// The types a schema names ("type" as a string or a list, or the types of anyOf / oneOf
// branches that name one); empty when it names none.
std::vector<std::string> SchemaTypes(const Json& schema, const Json& root) {
  const Json& s = Resolve(schema, root);
  std::vector<std::string> out;
  if (!s.is_object()) return out;
  if (auto t = s.find("type"); t != s.end()) {
    if (t->is_string()) out.push_back(t->get<std::string>());
    if (t->is_array())
      for (const Json& x : *t)
        if (x.is_string()) out.push_back(x.get<std::string>());
  }
  if (s.value("nullable", false)) out.push_back("null");
  return out;
}

class MiniMaxBuilder {
 public:
  explicit MiniMaxBuilder(GrammarAst& ast) : ast_(ast) {}

  // The parameters of one tool: required ones always, optional ones may be left out.
  Expr Parameters(const Json& params, const std::string& tool) {
    std::vector<Expr> seq;
    if (!params.is_object() || !params.contains("properties")) return Expr::Empty();
    std::vector<std::string> required;
    if (params.contains("required") && params["required"].is_array())
      for (const Json& r : params["required"])
        if (r.is_string()) required.push_back(r.get<std::string>());
    for (const auto& [name, schema] : params["properties"].items()) {
      Expr one = Expr::Seq({Lit("<parameter name=\"" + name + "\">"),
                            Value(schema, params, tool + "." + name), Lit("</parameter>\n")});
      const bool is_required = std::find(required.begin(), required.end(), name) != required.end();
      seq.push_back(is_required ? std::move(one) : Opt(std::move(one)));
    }
    return Expr::Seq(std::move(seq));
  }

 private:
  // One parameter value as the parser will type it (see the header).
  Expr Value(const Json& schema, const Json& root, const std::string& where) {
    std::vector<std::string> types = SchemaTypes(schema, root);
    const bool nullable = std::find(types.begin(), types.end(), "null") != types.end();
    std::erase(types, "null");
    const Json& s = Resolve(schema, root);
    // The parser types by the first non-null type (or as a string when none is named).
    if (types.empty() && s.is_object() && (s.contains("anyOf") || s.contains("oneOf"))) {
      // anyOf / oneOf of simple types (e.g. pydantic's Optional[str]): a string to the parser
      // (or "null").
      const Json& branches = s.contains("anyOf") ? s["anyOf"] : s["oneOf"];
      bool allows_string = false, allows_null = nullable;
      for (const Json& b : branches)
        for (const std::string& t : SchemaTypes(b, root)) {
          allows_string |= t == "string";
          allows_null |= t == "null";
        }
      return StringOrNull(Resolve(FirstStringBranch(branches, root), root), allows_null, where,
                          allows_string);
    }
    const std::string type = types.empty() ? "" : types.front();
    if (type == "string" || type.empty()) {
      const bool constrains = s.is_object() && (s.contains("enum") || s.contains("const"));
      if (type.empty() && !constrains && s.is_object() &&
          (s.contains("properties") || s.contains("items") || s.contains("allOf")))
        throw GrammarError("tool parameter " + where +
                           ": a schema without 'type' is written as a string by the MiniMax "
                           "tool-call format; give it a type");
      return StringOrNull(s, nullable, where, true);
    }
    // integer, number, boolean, object, array: the JSON text of the property's schema, which
    // the parser reads back as JSON (refs resolved against the parameters' definitions).
    Json sub = schema;
    if (sub.is_object()) {
      for (const char* defs : {"$defs", "definitions"})
        if (root.contains(defs) && !sub.contains(defs)) sub[defs] = root[defs];
    }
    const GrammarAst value = grammar::JsonSchemaValueToGrammar(sub, {});
    return Expr::Rule(EmbedGrammar(ast_, value, "p" + std::to_string(++embedded_) + "-"));
  }

  static const Json& FirstStringBranch(const Json& branches, const Json& root) {
    for (const Json& b : branches)
      for (const std::string& t : SchemaTypes(b, root))
        if (t == "string") return b;
    static const Json kEmpty = Json::object();
    return kEmpty;
  }

  // A raw string value under `s`'s string keywords, or "null" when nullable.
  Expr StringOrNull(const Json& s, bool nullable, const std::string& where, bool allows_string) {
    std::vector<Expr> alts;
    if (allows_string) alts.push_back(RawString(s, where));
    if (nullable) alts.push_back(Lit("null"));
    if (alts.empty())
      throw GrammarError("tool parameter " + where +
                         ": the MiniMax tool-call format writes it as a string, which its schema "
                         "does not allow");
    return Expr::Alt(std::move(alts));
  }

  Expr RawString(const Json& s, const std::string& where) {
    if (!s.is_object()) return RawStringNotNull(0, kUnbounded);
    std::vector<std::string> values;
    if (s.contains("const") && s["const"].is_string()) values.push_back(s["const"]);
    if (s.contains("enum") && s["enum"].is_array())
      for (const Json& v : s["enum"])
        if (v.is_string()) values.push_back(v.get<std::string>());
    if (s.contains("enum") || s.contains("const")) {
      std::vector<Expr> alts;
      for (const std::string& v : values)
        if (!IsNullWord(v)) alts.push_back(Lit(v));
      if (alts.empty())
        throw GrammarError("tool parameter " + where + ": no string value its enum allows");
      return Expr::Alt(std::move(alts));
    }
    std::string pattern;
    bool anchored = false;
    if (s.contains("format") && s["format"].is_string()) {
      const std::string_view f = grammar::json::FormatRegex(s["format"].get<std::string>());
      if (!f.empty()) pattern = f, anchored = true;
    }
    if (pattern.empty() && s.contains("pattern") && s["pattern"].is_string())
      pattern = s["pattern"].get<std::string>();
    if (!pattern.empty()) {
      grammar::RegexParts parts = grammar::ParseRegex(pattern);
      std::vector<Expr> seq;
      if (!anchored && !parts.anchored_start) seq.push_back(Expr::Repeat(RawChar(), 0, kUnbounded));
      seq.push_back(std::move(parts.expr));
      if (!anchored && !parts.anchored_end) seq.push_back(Expr::Repeat(RawChar(), 0, kUnbounded));
      return Expr::Seq(std::move(seq));
    }
    const int lo = s.value("minLength", 0);
    const int hi = s.contains("maxLength") ? s["maxLength"].get<int>() : kUnbounded;
    return RawStringNotNull(lo, hi);
  }

  GrammarAst& ast_;
  int embedded_ = 0;
};

const Json& FunctionOf(const Json& tool) {
  return tool.contains("function") ? tool["function"] : tool;
}

Json ParametersOf(const Json& fn) {
  if (fn.contains("parameters") && fn["parameters"].is_object()) return fn["parameters"];
  return Json{{"type", "object"}, {"properties", Json::object()}};
}

// Checks the parameters schema with the JSON Schema front end (unsupported keywords -> an error
// naming the tool and the keyword's path) and returns its grammar.
GrammarAst CheckedParametersGrammar(const Json& fn) {
  const std::string name = fn.value("name", "");
  try {
    return grammar::JsonSchemaValueToGrammar(ParametersOf(fn), {});
  } catch (const GrammarError& e) {
    throw GrammarError("tool '" + name + "' parameters: " + e.what());
  }
}

// Calls repeated as the format separates them: one, or one or more.
Expr Calls(Expr call, Expr separator, bool single) {
  if (single) return call;
  return Expr::Seq({call, Expr::Repeat(Expr::Seq({std::move(separator), call}), 0, kUnbounded)});
}

GrammarAst MiniMaxGrammar(const ToolCallConstraint& c) {
  GrammarAst ast;
  ast.root = ast.RuleIndex("root");
  MiniMaxBuilder builder(ast);
  std::vector<Expr> invokes;
  for (const Json& tool : c.tools) {
    const Json& fn = FunctionOf(tool);
    const std::string name = fn.value("name", "");
    if (!c.only_function.empty() && name != c.only_function) continue;
    CheckedParametersGrammar(fn);
    Expr params;
    try {
      params = builder.Parameters(ParametersOf(fn), name);
    } catch (const GrammarError& e) {
      throw GrammarError("tool '" + name + "' parameters: " + e.what());
    }
    const int rule = ast.RuleIndex("invoke-" + std::to_string(invokes.size()));
    ast.rules[rule].body =
        Expr::Seq({Lit("<invoke name=\"" + name + "\">\n"), std::move(params), Lit("</invoke>\n")});
    invokes.push_back(Expr::Rule(rule));
  }
  if (invokes.empty()) throw GrammarError("no tool to call");
  const int invoke = ast.RuleIndex("invoke");
  ast.rules[invoke].body = Expr::Alt(std::move(invokes));
  ast.rules[ast.root].body = Expr::Seq({Lit("<minimax:tool_call>\n"),
                                        Calls(Expr::Rule(invoke), Expr::Empty(), c.single_call),
                                        Lit("</minimax:tool_call>")});
  return ast;
}

GrammarAst Qwen3Grammar(const ToolCallConstraint& c) {
  GrammarAst ast;
  ast.root = ast.RuleIndex("root");
  std::vector<Expr> calls;
  for (const Json& tool : c.tools) {
    const Json& fn = FunctionOf(tool);
    const std::string name = fn.value("name", "");
    if (!c.only_function.empty() && name != c.only_function) continue;
    const GrammarAst args = CheckedParametersGrammar(fn);
    const std::string prefix = "f" + std::to_string(calls.size()) + "-";
    const int args_rule = EmbedGrammar(ast, args, prefix);
    calls.push_back(
        Expr::Seq({Lit("<tool_call>\n{\"name\": " + Json(name).dump() + ", \"arguments\": "),
                   Expr::Rule(args_rule), Lit("}\n</tool_call>")}));
  }
  if (calls.empty()) throw GrammarError("no tool to call");
  const int call = ast.RuleIndex("call");
  ast.rules[call].body = Expr::Alt(std::move(calls));
  ast.rules[ast.root].body = Calls(Expr::Rule(call), Lit("\n"), c.single_call);
  return ast;
}

}  // namespace

int EmbedGrammar(GrammarAst& dst, const GrammarAst& src, const std::string& prefix) {
  const int offset = static_cast<int>(dst.rules.size());
  for (const grammar::AstRule& r : src.rules) {
    grammar::AstRule copy = r;
    copy.name = prefix + r.name;
    Remap(copy.body, offset);
    dst.rules.push_back(std::move(copy));
  }
  return offset + src.root;
}

GrammarAst ToolCallGrammar(const ToolCallConstraint& constraint) {
  if (!constraint.tools.is_array() || constraint.tools.empty())
    throw GrammarError("tool calls need 'tools'");
  switch (constraint.format) {
    case chat::ToolCallFormat::kMiniMaxXml:
      return MiniMaxGrammar(constraint);
    case chat::ToolCallFormat::kQwen3Json:
      return Qwen3Grammar(constraint);
    case chat::ToolCallFormat::kNone:
      break;
  }
  throw GrammarError("tool calls need a tool-call parser (--tool-call-parser)");
}

}  // namespace moeserve::server
