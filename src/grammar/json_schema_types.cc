// Per-type rules of the JSON Schema compiler: objects, arrays, strings, numbers, allOf merging.
#include <cmath>
#include <limits>

#include "grammar/json_schema_compiler.h"
#include "grammar/regex.h"

namespace moeserve::grammar::json {
namespace {

Expr Sep(Expr ws) {
  return Expr::Seq({ws, Expr::Literal(","), ws});
}

// An integer bound from a JSON number: the smallest integer >= v (lower) or largest <= v.
int64_t IntegerBound(const Json& v, bool lower, bool exclusive, const std::string& where) {
  if (!v.is_number()) throw GrammarError(detail::Concat(where, " must be a number"));
  const double d = v.get<double>();
  if (!(std::fabs(d) < 9.2e18)) throw GrammarError(detail::Concat(where, " is out of range"));
  double b = lower ? std::ceil(d) : std::floor(d);
  if (exclusive && b == d) b += lower ? 1 : -1;
  return static_cast<int64_t>(b);
}

}  // namespace

Expr SchemaCompiler::Object(const Json& s, const std::string& path) {
  struct Prop {
    std::string name;
    const Json* schema;
    bool required;
  };
  static const Json kAny = true;
  std::vector<std::string> required;
  if (s.contains("required"))
    for (const Json& r : s["required"]) required.push_back(r.get<std::string>());
  auto is_required = [&](const std::string& n) {
    return std::find(required.begin(), required.end(), n) != required.end();
  };
  std::vector<Prop> props;
  if (s.contains("properties")) {
    if (!s["properties"].is_object()) Fail("'properties' at ", path, " must be an object");
    for (const auto& [name, schema] : s["properties"].items())
      props.push_back({name, &schema, is_required(name)});
  }
  for (const std::string& name : required) {
    const bool listed =
        std::any_of(props.begin(), props.end(), [&](const Prop& p) { return p.name == name; });
    if (!listed) props.push_back({name, &kAny, true});
  }
  const Json* additional = nullptr;  // absent: no other properties (see json_schema.h)
  if (s.contains("additionalProperties")) {
    const Json& a = s["additionalProperties"];
    if (!(a.is_boolean() && !a.get<bool>())) additional = &a;
  }

  const Expr ws = Ws();
  std::vector<int> pair_rules;
  for (const Prop& p : props) {
    const std::string at = path + ".properties." + p.name;
    pair_rules.push_back(Define("prop-" + p.name, Expr::Seq({Lit(Json(p.name).dump()), ws, Lit(":"),
                                                             ws, Schema(*p.schema, at)})));
  }
  // after[i]: the properties from i on when some property came before (each needs a comma);
  // first[i]: the same when none came before.
  Expr after_tail = Expr::Empty(), first_tail = Expr::Empty();
  if (additional) {
    const int extra =
        Define("extra-property", Expr::Seq({Expr::Rule(Primitive("string")), ws, Lit(":"), ws,
                                            Schema(*additional, path + ".additionalProperties")}));
    after_tail = Star(Expr::Seq({Sep(ws), Expr::Rule(extra)}));
    first_tail = Opt(Expr::Seq({Expr::Rule(extra), after_tail}));
  }
  int after = Define("props-after", std::move(after_tail));
  int first = Define("props-first", std::move(first_tail));
  for (size_t i = props.size(); i-- > 0;) {
    const Expr pair = Expr::Rule(pair_rules[i]);
    const Expr with_comma = Expr::Seq({Sep(ws), pair});
    Expr a = props[i].required ? Expr::Seq({with_comma, Expr::Rule(after)})
                               : Expr::Seq({Opt(with_comma), Expr::Rule(after)});
    Expr f = Expr::Seq({pair, Expr::Rule(after)});
    if (!props[i].required) f = Expr::Alt({std::move(f), Expr::Rule(first)});
    after = Define("props-after", std::move(a));
    first = Define("props-first", std::move(f));
  }
  return Expr::Seq({Lit("{"), ws, Expr::Rule(first), ws, Lit("}")});
}

Expr SchemaCompiler::Array(const Json& s, const std::string& path) {
  static const Json kEmpty = Json::array();
  // Draft 4-7 spell a tuple as an `items` array: the same as prefixItems with no other items.
  const bool tuple_items = s.contains("items") && s["items"].is_array();
  const Json& prefix = tuple_items                 ? s["items"]
                       : s.contains("prefixItems") ? s["prefixItems"]
                                                   : kEmpty;
  if (!prefix.is_array()) Fail("'prefixItems' at ", path, " must be an array");
  const size_t k = prefix.size();
  // Without `items`, only the prefix items when there are some (xgrammar's strict mode), else
  // any values.
  const Json items = s.contains("items") && !tuple_items ? s["items"] : Json(k == 0);
  const bool more = !(items.is_boolean() && !items.get<bool>());
  const int lo = s.value("minItems", 0);
  int hi = s.contains("maxItems") ? s["maxItems"].get<int>() : kUnbounded;
  if (!more && (hi == kUnbounded || hi > static_cast<int>(k))) hi = static_cast<int>(k);
  if (lo < 0 || (hi != kUnbounded && hi < lo))
    Fail("no array satisfies minItems ", lo, " and the item limit ", hi, " at ", path);
  if (hi > kMaxRepeat || lo > kMaxRepeat)
    Fail("minItems / maxItems above ", kMaxRepeat, " at ", path);

  const Expr ws = Ws();
  // The uniform tail: items after the prefix, count in [tail_lo, tail_hi].
  Expr tail = Expr::Empty();
  const int tail_lo = std::max(0, lo - static_cast<int>(k));
  const int tail_hi = hi == kUnbounded ? kUnbounded : hi - static_cast<int>(k);
  int item = -1;
  if (more && (tail_hi == kUnbounded || tail_hi > 0))
    item = Define("item", Schema(items, path + ".items"));
  auto repeat_tail = [&](bool first) -> Expr {
    if (item < 0) return Expr::Empty();
    const Expr next = Expr::Seq({Sep(ws), Expr::Rule(item)});
    if (!first) return Expr::Repeat(next, tail_lo, tail_hi);
    const int rest_hi = tail_hi == kUnbounded ? kUnbounded : tail_hi - 1;
    Expr some =
        Expr::Seq({Expr::Rule(item), Expr::Repeat(next, std::max(0, tail_lo - 1), rest_hi)});
    return tail_lo == 0 ? Opt(std::move(some)) : some;
  };
  if (k == 0) {
    tail = repeat_tail(true);
  } else {
    // Prefix items from the last: required up to minItems, then each optional and nested.
    Expr rest = repeat_tail(false);
    for (size_t j = k; j-- > 0;) {
      const Expr item_j = Expr::Rule(
          Define("item", Schema(prefix[j], path + ".prefixItems[" + std::to_string(j) + "]")));
      Expr here = j == 0 ? Expr::Seq({item_j, std::move(rest)})
                         : Expr::Seq({Sep(ws), item_j, std::move(rest)});
      rest = static_cast<int>(j) < lo ? std::move(here) : Opt(std::move(here));
    }
    tail = std::move(rest);
  }
  return Expr::Seq({Lit("["), ws, std::move(tail), ws, Lit("]")});
}

Expr SchemaCompiler::String(const Json& s, const std::string& path) {
  const bool has_length = s.contains("minLength") || s.contains("maxLength");
  std::string pattern;
  bool anchored = false;
  if (s.contains("format")) {
    const std::string_view f = FormatRegex(s["format"].get<std::string>());
    if (!f.empty()) pattern = f, anchored = true;
  }
  if (s.contains("pattern")) {
    if (!pattern.empty()) Fail("'pattern' together with 'format' at ", path, " is not supported");
    pattern = s["pattern"].get<std::string>();
  }
  if (!pattern.empty() && has_length)
    Fail("'minLength' / 'maxLength' together with 'pattern' or 'format' at ", path,
         " are not supported");
  Expr body;
  if (!pattern.empty()) {
    RegexParts parts;
    try {
      parts = ParseRegex(pattern);
    } catch (const GrammarError& e) {
      Fail("'pattern' at ", path, ": ", e.what());
    }
    body = EscapeForJsonString(parts.expr);
    if (!anchored && !parts.anchored_start) body = Expr::Seq({Star(JsonStringChar()), body});
    if (!anchored && !parts.anchored_end) body = Expr::Seq({body, Star(JsonStringChar())});
  } else if (has_length) {
    const int lo = s.value("minLength", 0);
    const int hi = s.contains("maxLength") ? s["maxLength"].get<int>() : kUnbounded;
    if (lo < 0 || (hi != kUnbounded && hi < lo) || lo > kMaxRepeat || hi > kMaxRepeat)
      Fail("unsupported minLength ", lo, " / maxLength ", hi, " at ", path);
    body = Expr::Repeat(JsonStringChar(), lo, hi);
  } else {
    return Expr::Rule(Primitive("string"));
  }
  return Expr::Rule(Define("string", Expr::Seq({Lit("\""), std::move(body), Lit("\"")})));
}

Expr SchemaCompiler::Integer(const Json& s, const std::string& path) {
  std::optional<int64_t> lo, hi;
  auto tighten = [](std::optional<int64_t>& bound, int64_t v, bool lower) {
    if (!bound || (lower ? v > *bound : v < *bound)) bound = v;
  };
  // Draft 4 spells exclusive bounds as booleans beside minimum / maximum.
  const bool excl_min_flag = s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_boolean() &&
                             s["exclusiveMinimum"].get<bool>();
  const bool excl_max_flag = s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_boolean() &&
                             s["exclusiveMaximum"].get<bool>();
  if (s.contains("minimum"))
    tighten(lo, IntegerBound(s["minimum"], true, excl_min_flag, path + ".minimum"), true);
  if (s.contains("maximum"))
    tighten(hi, IntegerBound(s["maximum"], false, excl_max_flag, path + ".maximum"), false);
  if (s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_number())
    tighten(lo, IntegerBound(s["exclusiveMinimum"], true, true, path + ".exclusiveMinimum"), true);
  if (s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_number())
    tighten(hi, IntegerBound(s["exclusiveMaximum"], false, true, path + ".exclusiveMaximum"),
            false);
  if (!lo && !hi) return Expr::Rule(Primitive("integer"));
  try {
    return Expr::Rule(Define("integer", IntegerRange(lo, hi)));
  } catch (const GrammarError& e) {
    Fail(e.what(), " at ", path);
  }
}

Expr SchemaCompiler::Number(const Json& s, const std::string& path) {
  std::optional<NumberBound> lo, hi;
  // A bound must be an integer; draft 4 marks exclusive bounds with booleans beside them.
  auto bound = [&](const char* key, bool exclusive, std::optional<NumberBound>& slot, bool lower) {
    const Json& v = s[key];
    if (!v.is_number() || v.get<double>() != std::floor(v.get<double>()) ||
        !(std::fabs(v.get<double>()) < 9.2e18))
      Fail("unsupported '", key, "' at ", path, ": number bounds must be integers");
    const NumberBound b{static_cast<int64_t>(v.get<double>()), exclusive};
    const bool tighter = !slot || (lower ? b.value > slot->value : b.value < slot->value) ||
                         (b.value == slot->value && exclusive);
    if (tighter) slot = b;
  };
  auto flag = [&](const char* key) {
    return s.contains(key) && s[key].is_boolean() && s[key].get<bool>();
  };
  if (s.contains("minimum")) bound("minimum", flag("exclusiveMinimum"), lo, true);
  if (s.contains("maximum")) bound("maximum", flag("exclusiveMaximum"), hi, false);
  if (s.contains("exclusiveMinimum") && !s["exclusiveMinimum"].is_boolean())
    bound("exclusiveMinimum", true, lo, true);
  if (s.contains("exclusiveMaximum") && !s["exclusiveMaximum"].is_boolean())
    bound("exclusiveMaximum", true, hi, false);
  if (!lo && !hi) return Expr::Rule(Primitive("number"));
  try {
    return Expr::Rule(Define("number", NumberRange(lo, hi)));
  } catch (const GrammarError& e) {
    Fail(e.what(), " at ", path);
  }
}

Json SchemaCompiler::MergeAllOf(const Json& s, const std::string& path) {
  Json merged = Json::object();
  auto merge = [&](auto&& self, const Json& part, const std::string& at) -> void {
    if (!part.is_object()) Fail("allOf part at ", at, " must be an object");
    if (part.contains("$ref")) return self(self, Resolve(part["$ref"].get<std::string>(), at), at);
    for (const auto& [key, value] : part.items()) {
      if (key == "allOf") {
        for (size_t i = 0; i < value.size(); ++i)
          self(self, value[i], at + ".allOf[" + std::to_string(i) + "]");
      } else if (key == "properties") {
        for (const auto& [name, schema] : value.items()) {
          Json& slot = merged["properties"][name];
          slot = slot.is_null() ? schema : Json{{"allOf", Json::array({slot, schema})}};
        }
      } else if (key == "required") {
        for (const Json& r : value)
          if (!merged.contains("required") ||
              std::find(merged["required"].begin(), merged["required"].end(), r) ==
                  merged["required"].end())
            merged["required"].push_back(r);
      } else if (kAnnotations.count(key)) {
        continue;
      } else if (merged.contains(key) && merged[key] != value) {
        Fail("allOf parts disagree on '", key, "' at ", at, " (not supported)");
      } else {
        merged[key] = value;
      }
    }
  };
  merge(merge, s, path);
  return merged;
}

}  // namespace moeserve::grammar::json
