// Globals, filters, tests and the methods of strings, lists and mappings. Where @huggingface/jinja
// defines one, its behaviour is followed; the rest follow Python Jinja2 (chat_template.h lists the
// places where the two differ).
#include <algorithm>
#include <cmath>
#include <ctime>
#include <unordered_set>

#include "chat/jinja/error.h"
#include "chat/jinja/interpreter.h"

namespace moeserve::chat::jinja {
namespace {

bool IsAsciiWord(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

std::string AsciiUpper(std::string s) {
  for (auto& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
  }
  return s;
}
std::string AsciiLower(std::string s) {
  for (auto& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  }
  return s;
}

// JS /\b\w/g -> uppercase.
std::string TitleCase(const std::string& s) {
  std::string out;
  bool prev_word = false;
  for (char32_t c : DecodeUtf8(s)) {
    bool word = IsAsciiWord(c);
    if (word && !prev_word && c >= 'a' && c <= 'z') c -= 32;
    prev_word = word;
    AppendUtf8(out, c);
  }
  return out;
}

std::string Capitalize(const std::string& s) {
  if (s.empty()) return s;
  std::string out = s;
  if (out[0] >= 'a' && out[0] <= 'z') out[0] = static_cast<char>(out[0] - 32);
  return out;
}

std::vector<std::string> SplitString(const std::string& s, const std::string& sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t p = s.find(sep, start);
    if (p == std::string::npos) break;
    parts.push_back(s.substr(start, p - start));
    start = p + sep.size();
  }
  parts.push_back(s.substr(start));
  return parts;
}

std::string ReplaceString(Interpreter& in, const std::string& s, const std::string& from,
                          const std::string& to, int64_t count) {
  if (count == 0) return s;
  std::string out;
  int64_t done = 0;
  if (from.empty()) {
    // Insert `to` before every code point and at the end (JS /(?=)/gu, Python "".replace).
    std::vector<char32_t> cps = DecodeUtf8(s);
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      if (i < cps.size()) AppendUtf8(out, cps[i]);
      in.CheckString(out.size());
    }
    return out;
  }
  size_t start = 0;
  while (count < 0 || done < count) {
    size_t p = s.find(from, start);
    if (p == std::string::npos) break;
    out.append(s, start, p - start);
    out += to;
    in.CheckString(out.size());
    start = p + from.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  in.CheckString(out.size());
  return out;
}

Value StrList(const std::vector<std::string>& parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (const auto& p : parts) items.push_back(Value::Str(p));
  return Value::MakeArray(std::move(items));
}

std::vector<Value> Chars(const std::string& s) {
  std::vector<Value> out;
  for (char32_t cp : DecodeUtf8(s)) {
    std::string ch;
    AppendUtf8(ch, cp);
    out.push_back(Value::Str(std::move(ch)));
  }
  return out;
}

const std::string& ArgString(const Value* v, const char* what) {
  if (!v || !v->is_string()) Throw(what, " must be a string");
  return v->str();
}

bool ArgBool(const Value* v, bool fallback, const char* what) {
  if (!v) return fallback;
  if (!v->is_bool()) Throw(what, " must be a boolean");
  return v->as_bool();
}

// JS parseInt(s, 10) / parseFloat(s); nullopt for NaN.
std::optional<double> JsParseNumber(const std::string& s, bool integer) {
  std::string t = JsTrim(s, true, false);
  size_t i = 0;
  std::string num;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) num += t[i++];
  if (!integer && t.compare(i, 8, "Infinity") == 0) {
    return num == "-" ? -INFINITY : INFINITY;
  }
  size_t digits = 0;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) {
    num += t[i++];
    ++digits;
  }
  if (!integer) {
    if (i < t.size() && t[i] == '.') {
      size_t j = i + 1, frac = 0;
      while (j < t.size() && std::isdigit(static_cast<unsigned char>(t[j]))) ++j, ++frac;
      if (digits + frac > 0) {
        num += t.substr(i, j - i);
        digits += frac;
        i = j;
      }
    }
    if (digits > 0 && i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
      size_t j = i + 1;
      if (j < t.size() && (t[j] == '+' || t[j] == '-')) ++j;
      size_t k = j;
      while (k < t.size() && std::isdigit(static_cast<unsigned char>(t[k]))) ++k;
      if (k > j) num += t.substr(i, k - i);
    }
  }
  if (digits == 0) return std::nullopt;
  return std::strtod(num.c_str(), nullptr);
}

Value NumberFromDouble(double d, bool integer) {
  if (integer) {
    if (std::fabs(d) < 9.2e18) return Value::Int(static_cast<int64_t>(std::trunc(d)));
    return Value::Float(std::trunc(d));
  }
  return Value::Float(d);
}

// HF getAttributeValue: dotted path through mappings, namespaces and list indices.
Value GetAttributePath(const Value& item, const std::string& path) {
  Value v = item;
  for (const std::string& part : SplitString(path, ".")) {
    if (v.is_object() || v.is_namespace()) {
      const Value* f = (v.is_object() ? v.object() : v.ns()).Find(part);
      v = f ? *f : Value();
    } else if (v.is_array()) {
      char* end = nullptr;
      long long idx = std::strtoll(part.c_str(), &end, 10);
      if (end == part.c_str() || idx < 0 || idx >= static_cast<long long>(v.array().items.size())) {
        return Value();
      }
      Value next = v.array().items[idx];
      v = next;
    } else {
      return Value();
    }
  }
  return v;
}

Value ObjectItems(const Object& obj) {
  std::vector<Value> items;
  for (const auto& [k, v] : obj.entries()) items.push_back(Value::MakeArray({Value::Str(k), v}));
  return Value::MakeArray(std::move(items));
}

Value DictSort(const Object& obj, const CallArgs& args) {
  bool case_sensitive = ArgBool(args.Get(0, "case_sensitive"), false, "case_sensitive");
  const Value* by_v = args.Get(1, "by");
  std::string by = by_v ? ArgString(by_v, "by") : "key";
  if (by != "key" && by != "value") Throw("by must be either 'key' or 'value'");
  bool reverse = ArgBool(args.Get(2, "reverse"), false, "reverse");
  std::vector<Value> items = ObjectItems(obj).array().items;
  size_t idx = by == "key" ? 0 : 1;
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    int c = Compare(a.array().items[idx], b.array().items[idx], case_sensitive);
    return reverse ? c > 0 : c < 0;
  });
  return Value::MakeArray(std::move(items));
}

Value Bound(const char* name, NativeFunction fn) {
  return Value::MakeFunction(name, std::move(fn));
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Indent(const std::string& s, const std::string& pad, bool first, bool blank) {
  std::vector<std::string> lines = SplitString(s, "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += '\n';
    bool skip = (!first && i == 0) || (!blank && lines[i].empty());
    if (!skip) out += pad;
    out += lines[i];
  }
  return out;
}

// Key for `unique`: JS Set semantics (numbers by value, strings by value, containers by identity).
std::string UniqueKey(const Value& v) {
  if (v.is_number()) return "n" + JsNumberToString(v.as_number());
  if (v.is_string()) return "s" + v.str();
  if (v.is_bool()) return v.as_bool() ? "t" : "f";
  if (v.is_none()) return "N";
  if (v.is_undefined()) return "U";
  return "p" + std::to_string(reinterpret_cast<uintptr_t>(v.identity()));
}

}  // namespace

// ---- members ----

Value GetBuiltinMember(Interpreter& in, const Value& object, const std::string& name) {
  if (object.is_string()) {
    std::string s = object.str();
    if (name == "length") return Value::Int(static_cast<int64_t>(Utf16Length(s)));
    if (name == "upper")
      return Bound("upper",
                   [s](Interpreter&, const CallArgs&) { return Value::Str(AsciiUpper(s)); });
    if (name == "lower")
      return Bound("lower",
                   [s](Interpreter&, const CallArgs&) { return Value::Str(AsciiLower(s)); });
    if (name == "title")
      return Bound("title",
                   [s](Interpreter&, const CallArgs&) { return Value::Str(TitleCase(s)); });
    if (name == "capitalize")
      return Bound("capitalize",
                   [s](Interpreter&, const CallArgs&) { return Value::Str(Capitalize(s)); });
    // HF ignores the `chars` argument: strip('\n') strips all whitespace (Python: only '\n').
    if (name == "strip")
      return Bound("strip", [s](Interpreter&, const CallArgs&) {
        return Value::Str(JsTrim(s, true, true));
      });
    if (name == "lstrip")
      return Bound("lstrip", [s](Interpreter&, const CallArgs&) {
        return Value::Str(JsTrim(s, true, false));
      });
    if (name == "rstrip")
      return Bound("rstrip", [s](Interpreter&, const CallArgs&) {
        return Value::Str(JsTrim(s, false, true));
      });
    if (name == "startswith" || name == "endswith") {
      bool starts = name == "startswith";
      return Bound(starts ? "startswith" : "endswith",
                   [s, starts](Interpreter&, const CallArgs& a) {
                     if (a.positional.empty())
                       Throw("startswith()/endswith() requires at least one argument");
                     auto test = [&](const std::string& p) {
                       if (p.size() > s.size()) return false;
                       return starts ? s.compare(0, p.size(), p) == 0
                                     : s.compare(s.size() - p.size(), p.size(), p) == 0;
                     };
                     const Value& pat = a.positional[0];
                     if (pat.is_string()) return Value::Bool(test(pat.str()));
                     if (pat.is_array()) {
                       for (const Value& item : pat.array().items) {
                         if (!item.is_string())
                           Throw("startswith()/endswith() tuple elements must be strings");
                         if (test(item.str())) return Value::Bool(true);
                       }
                       return Value::Bool(false);
                     }
                     Throw("startswith()/endswith() argument must be a string or tuple of strings");
                   });
    }
    if (name == "split" || name == "rsplit") {
      bool right = name == "rsplit";
      return Bound("split", [s, right](Interpreter& in, const CallArgs& a) {
        const Value* sep = a.Get(0, "sep");
        const Value* max_v = a.Get(1, "maxsplit");
        if (sep && !sep->is_string() && !sep->is_none())
          Throw("sep argument must be a string or null");
        if (max_v && !max_v->is_int()) Throw("maxsplit argument must be a number");
        int64_t maxsplit = max_v ? max_v->as_int() : -1;
        std::vector<std::string> parts;
        if (!sep || sep->is_none()) {
          // Runs of whitespace; the remainder after maxsplit keeps its inner spacing.
          std::vector<char32_t> cps = DecodeUtf8(s);
          std::vector<std::pair<size_t, size_t>> words;
          for (size_t i = 0; i < cps.size();) {
            while (i < cps.size() && IsJsWhitespace(cps[i])) ++i;
            size_t b = i;
            while (i < cps.size() && !IsJsWhitespace(cps[i])) ++i;
            if (i > b) words.emplace_back(b, i);
          }
          auto text = [&](size_t b, size_t e) {
            std::string o;
            for (size_t k = b; k < e; ++k) AppendUtf8(o, cps[k]);
            return o;
          };
          if (maxsplit < 0 || static_cast<size_t>(maxsplit) >= words.size()) {
            for (auto [b, e] : words) parts.push_back(text(b, e));
          } else if (!right) {
            for (int64_t k = 0; k < maxsplit; ++k)
              parts.push_back(text(words[k].first, words[k].second));
            size_t b = words[maxsplit].first;
            size_t e = cps.size();
            while (e > b && IsJsWhitespace(cps[e - 1])) --e;
            // HF keeps trailing text after the last split as it is.
            parts.push_back(text(b, cps.size()));
            (void)e;
          } else {
            size_t n = words.size();
            size_t first_kept = n - maxsplit;
            parts.push_back(text(words[0].first, words[first_kept - 1].second));
            for (size_t k = first_kept; k < n; ++k)
              parts.push_back(text(words[k].first, words[k].second));
          }
        } else {
          const std::string& sp = sep->str();
          if (sp.empty()) Throw("empty separator");
          parts = SplitString(s, sp);
          if (maxsplit >= 0 && parts.size() > static_cast<size_t>(maxsplit) + 1) {
            std::vector<std::string> merged;
            if (!right) {
              merged.assign(parts.begin(), parts.begin() + maxsplit);
              std::string rest;
              for (size_t k = maxsplit; k < parts.size(); ++k)
                rest += (k > static_cast<size_t>(maxsplit) ? sp : "") + parts[k];
              merged.push_back(rest);
            } else {
              size_t keep_from = parts.size() - maxsplit;
              std::string head;
              for (size_t k = 0; k < keep_from; ++k) head += (k > 0 ? sp : "") + parts[k];
              merged.push_back(head);
              merged.insert(merged.end(), parts.begin() + keep_from, parts.end());
            }
            parts = std::move(merged);
          }
        }
        in.CheckArray(parts.size());
        return StrList(parts);
      });
    }
    if (name == "replace") {
      return Bound("replace", [s](Interpreter& in, const CallArgs& a) {
        if (a.positional.size() < 2) Throw("replace() requires at least two arguments");
        const Value& from = a.positional[0];
        const Value& to = a.positional[1];
        if (!from.is_string() || !to.is_string()) Throw("replace() arguments must be strings");
        const Value* count = a.Get(2, "count");
        if (count && !count->is_int() && !count->is_none())
          Throw("replace() count must be a number or null");
        int64_t n = count && count->is_int() ? count->as_int() : -1;
        return Value::Str(ReplaceString(in, s, from.str(), to.str(), n));
      });
    }
    if (name == "find" || name == "rfind" || name == "count") {
      std::string which = name;
      return Bound("find", [s, which](Interpreter&, const CallArgs& a) {
        const std::string& sub = ArgString(a.Get(0, "sub"), "argument");
        if (which == "count") {
          if (sub.empty()) return Value::Int(static_cast<int64_t>(DecodeUtf8(s).size() + 1));
          int64_t n = 0;
          for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
          return Value::Int(n);
        }
        size_t p = which == "find" ? s.find(sub) : s.rfind(sub);
        if (p == std::string::npos) return Value::Int(-1);
        return Value::Int(
            static_cast<int64_t>(DecodeUtf8(std::string_view(s).substr(0, p)).size()));
      });
    }
    if (name == "join") {
      return Bound("join", [s](Interpreter& in, const CallArgs& a) {
        const Value* list = a.Get(0, "iterable");
        if (!list || !list->is_array()) Throw("join() argument must be a list");
        std::string out;
        for (size_t i = 0; i < list->array().items.size(); ++i) {
          if (i > 0) out += s;
          out += JsValueString(list->array().items[i]);
          in.CheckString(out.size());
        }
        return Value::Str(std::move(out));
      });
    }
    return Value();
  }
  if (object.is_array()) {
    if (name == "length") return Value::Int(static_cast<int64_t>(object.array().items.size()));
    if (name == "append") {
      Value self = object;
      return Bound("append", [self](Interpreter& in, const CallArgs& a) {
        if (a.positional.size() != 1) Throw("append() takes exactly one argument");
        in.CheckArray(self.array().items.size() + 1);
        self.array().items.push_back(a.positional[0]);
        return Value::None();
      });
    }
    if (name == "pop") {
      Value self = object;
      return Bound("pop", [self](Interpreter&, const CallArgs& a) {
        auto& items = self.array().items;
        if (items.empty()) Throw("pop from empty list");
        int64_t n = static_cast<int64_t>(items.size());
        int64_t i = a.positional.empty()       ? n - 1
                    : a.positional[0].is_int() ? a.positional[0].as_int()
                                               : n;
        if (i < 0) i += n;
        if (i < 0 || i >= n) Throw("pop index out of range");
        Value v = items[i];
        items.erase(items.begin() + i);
        return v;
      });
    }
    return Value();
  }
  if (object.is_object()) {
    Value self = object;
    if (name == "get") {
      return Bound("get", [self](Interpreter&, const CallArgs& a) {
        if (a.positional.empty() || !a.positional[0].is_string())
          Throw("Object key must be a string");
        if (const Value* v = self.object().Find(a.positional[0].str())) return *v;
        return a.positional.size() > 1 ? a.positional[1] : Value::None();
      });
    }
    if (name == "items")
      return Bound("items",
                   [self](Interpreter&, const CallArgs&) { return ObjectItems(self.object()); });
    if (name == "keys") {
      return Bound("keys", [self](Interpreter&, const CallArgs&) {
        std::vector<Value> keys;
        for (const auto& [k, v] : self.object().entries()) keys.push_back(Value::Str(k));
        return Value::MakeArray(std::move(keys));
      });
    }
    if (name == "values") {
      return Bound("values", [self](Interpreter&, const CallArgs&) {
        std::vector<Value> values;
        for (const auto& [k, v] : self.object().entries()) values.push_back(v);
        return Value::MakeArray(std::move(values));
      });
    }
    if (name == "dictsort") {
      return Bound("dictsort",
                   [self](Interpreter&, const CallArgs& a) { return DictSort(self.object(), a); });
    }
  }
  return Value();
}

// ---- tests ----

bool Interpreter::ApplyTest(const std::string& name, const Value& v, const CallArgs& args) {
  const Value arg = args.positional.empty() ? Value() : args.positional[0];
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "mapping") return v.is_object();
  if (name == "iterable") return (v.is_array() && !v.array().is_tuple) || v.is_string();
  if (name == "sequence") return v.is_array() || v.is_object() || v.is_string();
  if (name == "callable") return v.is_function();
  if (name == "lower") return v.is_string() && v.str() == AsciiLower(v.str());
  if (name == "upper") return v.is_string() && v.str() == AsciiUpper(v.str());
  if (name == "odd" || name == "even") {
    if (!v.is_int()) Throw("cannot ", name, " on ", v.TypeName());
    bool odd = v.as_int() % 2 != 0;
    return name == "odd" ? odd : !odd;
  }
  if (name == "divisibleby") {
    if (!v.is_int() || !arg.is_int() || arg.as_int() == 0) Throw("divisibleby needs integers");
    return v.as_int() % arg.as_int() == 0;
  }
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas")
    return StrictEquals(v, arg);
  if (name == "ne" || name == "!=") return !StrictEquals(v, arg);
  if (name == "lt" || name == "gt" || name == "le" || name == "ge") {
    int c = Compare(v, arg, true);
    return name == "lt" ? c < 0 : name == "gt" ? c > 0 : name == "le" ? c <= 0 : c >= 0;
  }
  if (name == "in") {
    if (arg.is_array()) {
      for (const Value& x : arg.array().items) {
        if (StrictEquals(x, v)) return true;
      }
      return false;
    }
    if (arg.is_string() && v.is_string()) return arg.str().find(v.str()) != std::string::npos;
    if (arg.is_object() && v.is_string()) return arg.object().Find(v.str()) != nullptr;
    Throw("'in' test needs a container");
  }
  Throw("Unknown test: ", name);
}

// ---- filters ----

Value Interpreter::ApplyFilter(const std::string& name, const Value& v, const CallArgs* call) {
  static const CallArgs kNoArgs;
  const CallArgs& a = call ? *call : kNoArgs;
  if (name == "safe") return v;
  if (name == "tojson") {
    JsonOptions o;
    if (call) {
      // HF reads only keyword arguments here.
      if (const Value* indent = a.Kwarg("indent")) {
        if (!indent->is_int() && !indent->is_none()) Throw("If set, indent must be a number");
        o.indent =
            indent->is_int() ? static_cast<int>(std::clamp<int64_t>(indent->as_int(), 0, 64)) : 0;
      }
      o.ensure_ascii = ArgBool(a.Kwarg("ensure_ascii"), false, "ensure_ascii");
      o.sort_keys = ArgBool(a.Kwarg("sort_keys"), false, "sort_keys");
      if (const Value* sep = a.Kwarg("separators"); sep && !sep->is_none()) {
        if (!sep->is_array() || sep->array().items.size() != 2 ||
            !sep->array().items[0].is_string() || !sep->array().items[1].is_string()) {
          Throw("separators must be a tuple of two strings");
        }
        o.has_separators = true;
        o.item_separator = sep->array().items[0].str();
        o.key_separator = sep->array().items[1].str();
      }
    }
    std::string s = ToJson(v, o);
    CheckString(s.size());
    ChargeWork(static_cast<int64_t>(s.size() / 64));
    return Value::Str(std::move(s));
  }
  if (name == "default" || name == "d") {
    Value fallback = a.positional.empty() ? Value::Str("") : a.positional[0];
    bool boolean = ArgBool(a.Get(1, "boolean"), false, "`default` filter flag");
    if (v.is_undefined() || (boolean && !Truthy(v))) return fallback;
    return v;
  }
  if (name == "join") {
    std::vector<Value> items;
    if (v.is_string()) {
      items = Chars(v.str());
    } else if (v.is_array()) {
      items = v.array().items;
    } else {
      Throw("Cannot apply filter \"join\" to type: ", v.TypeName());
    }
    const Value* sep_v = a.Get(0, "separator");
    std::string sep = sep_v ? ArgString(sep_v, "separator") : "";
    const Value* attr = a.Kwarg("attribute");
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += sep;
      Value item = attr ? GetAttributePath(items[i], JsValueString(*attr)) : items[i];
      if (!item.is_none() && !item.is_undefined()) out += JsValueString(item);
      CheckString(out.size());
    }
    ChargeWork(static_cast<int64_t>(items.size() + out.size() / 64));
    return Value::Str(std::move(out));
  }
  if (name == "int" || name == "float") {
    bool integer = name == "int";
    const Value* d = a.Get(0, "default");
    Value fallback = d ? *d : integer ? Value::Int(0) : Value::Float(0);
    if (v.is_string()) {
      auto parsed = JsParseNumber(v.str(), integer);
      if (!parsed) return fallback;
      return NumberFromDouble(*parsed, integer);
    }
    if (v.is_int()) return integer ? v : Value::Float(v.as_number());
    if (v.is_float()) return NumberFromDouble(v.as_float(), integer);
    if (v.is_bool()) return integer ? Value::Int(v.as_bool()) : Value::Float(v.as_bool());
    Throw("Cannot apply filter \"", name, "\" to type: ", v.TypeName());
  }
  if (name == "length" || name == "count") {
    if (v.is_string()) return Value::Int(static_cast<int64_t>(Utf16Length(v.str())));
    if (v.is_array()) return Value::Int(static_cast<int64_t>(v.array().items.size()));
    if (v.is_object()) return Value::Int(static_cast<int64_t>(v.object().size()));
    Throw("Cannot apply filter \"length\" to type: ", v.TypeName());
  }
  if (name == "string") {
    if (v.is_string()) return v;
    if (v.is_none()) return Value::Str("None");
    return Value::Str(ToDisplayString(v));
  }
  if (name == "items") {
    if (!v.is_object()) Throw("Cannot apply filter \"items\" to type: ", v.TypeName());
    return ObjectItems(v.object());
  }
  if (name == "dictsort") {
    if (!v.is_object()) Throw("Cannot apply filter \"dictsort\" to type: ", v.TypeName());
    return DictSort(v.object(), a);
  }
  if (v.is_object() && (name == "keys" || name == "values" || name == "get")) {
    return CallFunction(GetBuiltinMember(*this, v, name), a);
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" ||
      name == "trim" || name == "indent" || name == "replace" || name == "escape" || name == "e" ||
      name == "wordcount") {
    if (!v.is_string()) Throw("Cannot apply filter \"", name, "\" to type: ", v.TypeName());
    const std::string& s = v.str();
    if (name == "upper") return Value::Str(AsciiUpper(s));
    if (name == "lower") return Value::Str(AsciiLower(s));
    if (name == "title") return Value::Str(TitleCase(s));
    if (name == "capitalize") return Value::Str(Capitalize(s));
    if (name == "escape" || name == "e") return Value::Str(HtmlEscape(s));
    if (name == "wordcount") {
      int64_t n = 0;
      bool in_word = false;
      for (char32_t c : DecodeUtf8(s)) {
        bool w = IsAsciiWord(c) || c >= 0x80;
        if (w && !in_word) ++n;
        in_word = w;
      }
      return Value::Int(n);
    }
    if (name == "trim") {
      const Value* chars = a.Get(0, "chars");
      if (!chars || chars->is_none()) return Value::Str(JsTrim(s, true, true));
      const std::string& set = ArgString(chars, "chars");
      std::vector<char32_t> cps = DecodeUtf8(s), strip = DecodeUtf8(set);
      auto in_set = [&](char32_t c) {
        return std::find(strip.begin(), strip.end(), c) != strip.end();
      };
      size_t b = 0, e = cps.size();
      while (b < e && in_set(cps[b])) ++b;
      while (e > b && in_set(cps[e - 1])) --e;
      std::string out;
      for (size_t i = b; i < e; ++i) AppendUtf8(out, cps[i]);
      return Value::Str(std::move(out));
    }
    if (name == "indent") {
      const Value* width = a.Get(0, "width");
      std::string pad(4, ' ');
      if (width) {
        if (width->is_int()) {
          pad =
              std::string(static_cast<size_t>(std::clamp<int64_t>(width->as_int(), 0, 4096)), ' ');
        } else if (width->is_string()) {
          pad = width->str();
        } else {
          Throw("width must be an integer or a string");
        }
      }
      bool first =
          call ? Truthy(a.Get(1, "first") ? *a.Get(1, "first") : Value::Bool(false)) : false;
      bool blank =
          call ? Truthy(a.Get(2, "blank") ? *a.Get(2, "blank") : Value::Bool(false)) : false;
      std::string out = Indent(s, pad, first, blank);
      CheckString(out.size());
      return Value::Str(std::move(out));
    }
    // replace
    CallArgs args = a;
    return CallFunction(GetBuiltinMember(*this, v, "replace"), args);
  }
  if (name == "first" || name == "last") {
    if (v.is_array()) {
      const auto& items = v.array().items;
      if (items.empty()) return Value();
      return name == "first" ? items.front() : items.back();
    }
    if (v.is_string()) {
      std::vector<Value> chars = Chars(v.str());
      if (chars.empty()) return Value();
      return name == "first" ? chars.front() : chars.back();
    }
    Throw("Cannot apply filter \"", name, "\" to type: ", v.TypeName());
  }
  if (name == "list") {
    if (v.is_array()) return call ? Value::MakeArray(v.array().items) : v;
    if (v.is_string()) return Value::MakeArray(Chars(v.str()));
    if (v.is_object()) {
      std::vector<Value> keys;
      for (const auto& [k, x] : v.object().entries()) keys.push_back(Value::Str(k));
      return Value::MakeArray(std::move(keys));
    }
    Throw("Cannot apply filter \"list\" to type: ", v.TypeName());
  }
  if (name == "reverse") {
    if (v.is_array()) {
      std::vector<Value> items(v.array().items.rbegin(), v.array().items.rend());
      return Value::MakeArray(std::move(items));
    }
    if (v.is_string()) {
      std::vector<char32_t> cps = DecodeUtf8(v.str());
      std::string out;
      for (auto it = cps.rbegin(); it != cps.rend(); ++it) AppendUtf8(out, *it);
      return Value::Str(std::move(out));
    }
    Throw("Cannot apply filter \"reverse\" to type: ", v.TypeName());
  }
  if (name == "abs") {
    if (v.is_int()) return Value::Int(v.as_int() < 0 ? -v.as_int() : v.as_int());
    if (v.is_float()) return Value::Float(std::fabs(v.as_float()));
    Throw("Cannot apply filter \"abs\" to type: ", v.TypeName());
  }
  if (name == "round") {
    if (!v.is_number()) Throw("Cannot apply filter \"round\" to type: ", v.TypeName());
    const Value* prec_v = a.Get(0, "precision");
    const Value* method_v = a.Get(1, "method");
    int64_t prec = prec_v && prec_v->is_int() ? std::clamp<int64_t>(prec_v->as_int(), -20, 20) : 0;
    std::string method = method_v ? ArgString(method_v, "method") : "common";
    double scale = std::pow(10.0, static_cast<double>(prec));
    double x = v.as_number() * scale;
    x = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::round(x);
    return Value::Float(x / scale);
  }
  if (name == "bool") return Value::Bool(Truthy(v));
  if (name == "unique" || name == "sort" || name == "min" || name == "max" || name == "sum" ||
      name == "map" || name == "select" || name == "reject" || name == "selectattr" ||
      name == "rejectattr" || name == "batch") {
    if (!v.is_array()) Throw("Cannot apply filter \"", name, "\" to type: ", v.TypeName());
    const auto& items = v.array().items;
    ChargeWork(static_cast<int64_t>(items.size()));
    if (name == "unique") {
      std::unordered_set<std::string> seen;
      std::vector<Value> out;
      for (const Value& x : items) {
        if (seen.insert(UniqueKey(x)).second) out.push_back(x);
      }
      return Value::MakeArray(std::move(out));
    }
    bool case_sensitive = ArgBool(a.Kwarg("case_sensitive"), false, "case_sensitive");
    const Value* attr_v = a.Kwarg("attribute");
    auto key = [&](const Value& x) {
      if (!attr_v || attr_v->is_none()) return x;
      return GetAttributePath(
          x, attr_v->is_int() ? std::to_string(attr_v->as_int()) : JsValueString(*attr_v));
    };
    if (name == "sort") {
      bool reverse = ArgBool(a.Get(0, "reverse"), false, "reverse");
      case_sensitive = ArgBool(a.Get(1, "case_sensitive"), false, "case_sensitive");
      if (!attr_v && a.positional.size() > 2) attr_v = &a.positional[2];
      std::vector<Value> out = items;
      std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
        int c = Compare(key(x), key(y), case_sensitive);
        return reverse ? c > 0 : c < 0;
      });
      ChargeWork(static_cast<int64_t>(out.size()) * 20);
      return Value::MakeArray(std::move(out));
    }
    if (name == "min" || name == "max") {
      if (items.empty()) return Value();
      Value best = items[0];
      for (const Value& x : items) {
        int c = Compare(key(x), key(best), case_sensitive);
        if (name == "min" ? c < 0 : c > 0) best = x;
      }
      return best;
    }
    if (name == "sum") {
      const Value* start = a.Kwarg("start");
      bool is_float = start && start->is_float();
      int64_t isum = start && start->is_int() ? start->as_int() : 0;
      double fsum = start && start->is_number() ? start->as_number() : 0;
      for (const Value& x0 : items) {
        Value x = key(x0);
        if (!x.is_number()) Throw("sum() needs numbers");
        if (x.is_float()) is_float = true;
        if (x.is_int()) isum += x.as_int();
        fsum += x.as_number();
      }
      return is_float ? Value::Float(fsum) : Value::Int(isum);
    }
    if (name == "batch") {
      const Value* n_v = a.Get(0, "linecount");
      if (!n_v || !n_v->is_int() || n_v->as_int() <= 0) Throw("batch needs a positive count");
      std::vector<Value> out, cur;
      for (const Value& x : items) {
        cur.push_back(x);
        if (static_cast<int64_t>(cur.size()) == n_v->as_int()) {
          out.push_back(Value::MakeArray(std::move(cur)));
          cur.clear();
        }
      }
      if (!cur.empty()) out.push_back(Value::MakeArray(std::move(cur)));
      return Value::MakeArray(std::move(out));
    }
    if (name == "map") {
      std::vector<Value> out;
      if (const Value* attr = a.Kwarg("attribute")) {
        if (!attr->is_string()) Throw("attribute must be a string");
        const Value* dflt = a.Kwarg("default");
        for (const Value& x : items) {
          if (!x.is_object() && !x.is_namespace()) Throw("items in map must be an object");
          Value r = GetAttributePath(x, attr->str());
          out.push_back(r.is_undefined() && dflt ? *dflt : r);
        }
        return Value::MakeArray(std::move(out));
      }
      if (a.positional.empty() || !a.positional[0].is_string()) {
        Throw("`map` needs attribute= or a filter name");
      }
      CallArgs rest;
      rest.positional.assign(a.positional.begin() + 1, a.positional.end());
      rest.kwargs = a.kwargs;
      bool with_args = a.positional.size() > 1 || !a.kwargs.empty();
      for (const Value& x : items) {
        out.push_back(ApplyFilter(a.positional[0].str(), x, with_args ? &rest : nullptr));
      }
      return Value::MakeArray(std::move(out));
    }
    // select / reject / selectattr / rejectattr
    bool by_attr = name == "selectattr" || name == "rejectattr";
    bool select = name == "select" || name == "selectattr";
    size_t test_pos = by_attr ? 1 : 0;
    std::string attr;
    if (by_attr) {
      if (a.positional.empty() || !a.positional[0].is_string())
        Throw("arguments of `", name, "` must be strings");
      attr = a.positional[0].str();
    }
    std::string test_name;
    if (a.positional.size() > test_pos) {
      if (!a.positional[test_pos].is_string()) Throw("arguments of `", name, "` must be strings");
      test_name = a.positional[test_pos].str();
    }
    CallArgs test_args;
    test_args.positional.assign(a.positional.begin() + std::min(a.positional.size(), test_pos + 1),
                                a.positional.end());
    std::vector<Value> out;
    for (const Value& x : items) {
      bool result;
      if (by_attr) {
        if (!x.is_object() && !x.is_namespace())
          Throw("`", name, "` can only be applied to array of objects");
        const Value* field = (x.is_object() ? x.object() : x.ns()).Find(attr);
        result =
            field ? (test_name.empty() ? Truthy(*field) : ApplyTest(test_name, *field, test_args))
                  : false;
      } else {
        result = test_name.empty() ? Truthy(x) : ApplyTest(test_name, x, test_args);
      }
      if (result == select) out.push_back(x);
    }
    return Value::MakeArray(std::move(out));
  }
  Throw("Unknown filter: ", name, " (on ", v.TypeName(), ")");
}

// ---- globals ----

void InstallGlobals(Scope& g) {
  g.Set("true", Value::Bool(true));
  g.Set("false", Value::Bool(false));
  g.Set("none", Value::None());
  g.Set("True", Value::Bool(true));
  g.Set("False", Value::Bool(false));
  g.Set("None", Value::None());
  g.Set("raise_exception", Bound("raise_exception", [](Interpreter&, const CallArgs& a) -> Value {
          std::string msg;
          for (const Value& v : a.positional) msg += ToDisplayString(v);
          Throw(msg.empty() ? "raise_exception() called" : msg);
        }));
  g.Set("range", Bound("range", [](Interpreter& in, const CallArgs& a) {
          std::vector<int64_t> p;
          for (const Value& v : a.positional) {
            if (!v.is_int()) Throw("range() arguments must be integers");
            p.push_back(v.as_int());
          }
          if (p.empty() || p.size() > 3) Throw("range() takes 1 to 3 arguments");
          int64_t start = p.size() == 1 ? 0 : p[0];
          int64_t stop = p.size() == 1 ? p[0] : p[1];
          int64_t step = p.size() == 3 ? p[2] : 1;
          if (step == 0) Throw("range() step must not be zero");
          std::vector<Value> out;
          for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            in.CheckArray(out.size() + 1);
            out.push_back(Value::Int(i));
            if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
          }
          in.ChargeWork(static_cast<int64_t>(out.size()));
          return Value::MakeArray(std::move(out));
        }));
  g.Set("namespace", Bound("namespace", [](Interpreter&, const CallArgs& a) {
          auto obj = std::make_shared<Object>();
          if (a.positional.size() > 1) Throw("namespace expected at most 1 argument");
          if (a.positional.size() == 1) {
            const Value& src = a.positional[0];
            if (src.is_object()) {
              for (const auto& [k, v] : src.object().entries()) obj->Set(k, v);
            } else if (src.is_array()) {
              for (const Value& pair : src.array().items) {
                if (!pair.is_array() || pair.array().items.size() != 2 ||
                    !pair.array().items[0].is_string()) {
                  Throw("namespace expected an object or an iterable of [key, value] pairs");
                }
                obj->Set(pair.array().items[0].str(), pair.array().items[1]);
              }
            } else {
              Throw("'", src.TypeName(), "' object is not iterable");
            }
          }
          for (const auto& [k, v] : a.kwargs) obj->Set(k, v);
          return Value::MakeNamespace(std::move(obj));
        }));
  g.Set("dict", Bound("dict", [](Interpreter&, const CallArgs& a) {
          auto obj = std::make_shared<Object>();
          for (const Value& src : a.positional) {
            if (!src.is_object()) Throw("dict() positional argument must be a mapping");
            for (const auto& [k, v] : src.object().entries()) obj->Set(k, v);
          }
          for (const auto& [k, v] : a.kwargs) obj->Set(k, v);
          return Value::MakeObject(std::move(obj));
        }));
  g.Set("strftime_now", Bound("strftime_now", [](Interpreter&, const CallArgs& a) {
          const std::string& fmt = ArgString(a.Get(0, "format"), "format");
          if (fmt.size() > 256) Throw("strftime_now format too long");
          std::time_t now = std::time(nullptr);
          std::tm tm{};
          localtime_r(&now, &tm);
          char buf[1024];
          size_t n = std::strftime(buf, sizeof(buf), fmt.c_str(), &tm);
          return Value::Str(std::string(buf, n));
        }));
}

}  // namespace moeserve::chat::jinja
