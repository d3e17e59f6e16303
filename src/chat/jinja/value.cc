#include "chat/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "chat/jinja/error.h"

namespace moeserve::chat::jinja {

size_t Object::size() const {
  return entries_.size();
}
const std::vector<std::pair<std::string, Value>>& Object::entries() const {
  return entries_;
}

const Value* Object::Find(std::string_view key) const {
  auto it = index_.find(std::string(key));
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

void Object::Set(const std::string& key, Value value) {
  auto [it, inserted] = index_.emplace(key, entries_.size());
  if (inserted) {
    entries_.emplace_back(key, std::move(value));
  } else {
    entries_[it->second].second = std::move(value);
  }
}

const Value* CallArgs::Kwarg(std::string_view name) const {
  for (const auto& [k, v] : kwargs) {
    if (k == name) return &v;
  }
  return nullptr;
}

const Value* CallArgs::Get(size_t i, std::string_view name) const {
  if (i < positional.size()) return &positional[i];
  return Kwarg(name);
}

Value Value::MakeArray(std::vector<Value> items, bool is_tuple) {
  auto a = std::make_shared<Array>();
  a->items = std::move(items);
  a->is_tuple = is_tuple;
  return Value(std::move(a));
}

Value Value::MakeObject(std::shared_ptr<Object> object) {
  return Value(object ? std::move(object) : std::make_shared<Object>());
}

Value Value::MakeNamespace(std::shared_ptr<Object> object) {
  return Value(NamespaceRef{object ? std::move(object) : std::make_shared<Object>()});
}

Value Value::MakeFunction(std::string name, NativeFunction fn) {
  return Value(std::make_shared<const Function>(Function{std::move(name), std::move(fn)}));
}

const void* Value::identity() const {
  switch (kind()) {
    case Kind::kArray:
      return std::get<ArrPtr>(v_).get();
    case Kind::kObject:
      return std::get<ObjPtr>(v_).get();
    case Kind::kNamespace:
      return std::get<NamespaceRef>(v_).object.get();
    case Kind::kFunction:
      return std::get<FnPtr>(v_).get();
    default:
      return nullptr;
  }
}

const char* Value::TypeName() const {
  switch (kind()) {
    case Kind::kUndefined:
      return "undefined";
    case Kind::kNone:
      return "none";
    case Kind::kBool:
      return "boolean";
    case Kind::kInt:
      return "integer";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "string";
    case Kind::kArray:
      return array().is_tuple ? "tuple" : "list";
    case Kind::kObject:
      return "mapping";
    case Kind::kNamespace:
      return "namespace";
    case Kind::kFunction:
      return "function";
  }
  return "?";
}

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.as_bool();
    case Value::Kind::kInt:
      return v.as_int() != 0;
    case Value::Kind::kFloat:
      return v.as_float() != 0 && !std::isnan(v.as_float());
    case Value::Kind::kString:
      return !v.str().empty();
    case Value::Kind::kArray:
      return !v.array().items.empty();
    case Value::Kind::kObject:
      return v.object().size() > 0;
    case Value::Kind::kNamespace:
    case Value::Kind::kFunction:
      return true;
  }
  return false;
}

std::string JsNumberToString(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  if (d == 0) return "0";
  std::string out;
  if (d < 0) {
    out = "-";
    d = -d;
  }
  // Shortest round-trip digits, then ECMAScript Number::toString layout.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  size_t e_pos = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e_pos; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  int exp10 = std::atoi(sci.c_str() + e_pos + 1);
  int k = static_cast<int>(digits.size());
  int n = exp10 + 1;  // value = 0.digits * 10^n
  if (k <= n && n <= 21) {
    out += digits + std::string(n - k, '0');
  } else if (0 < n && n <= 21) {
    out += digits.substr(0, n) + "." + digits.substr(n);
  } else if (-6 < n && n <= 0) {
    out += "0." + std::string(-n, '0') + digits;
  } else {
    out += digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += (n - 1 >= 0 ? "e+" : "e-") + std::to_string(std::abs(n - 1));
  }
  return out;
}

std::string FloatToString(double d) {
  if (d == 0 && std::signbit(d)) return "-0.0";
  if (std::isfinite(d) && std::floor(d) == d) {
    // JS toFixed(1) switches to exponent form at 1e21.
    if (std::fabs(d) < 1e21) {
      char buf[400];
      std::snprintf(buf, sizeof(buf), "%.1f", d);
      return buf;
    }
  }
  return JsNumberToString(d);
}

// ---- UTF-8 ----

std::vector<char32_t> DecodeUtf8(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    bool ok = len > 0 && i + len <= s.size();
    for (int j = 1; ok && j < len; ++j) {
      unsigned char cc = s[i + j];
      if ((cc >> 6) != 2) ok = false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (ok) {
      static constexpr char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
      if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) ok = false;
    }
    if (!ok) {
      out.push_back(0xfffd);
      ++i;
    } else {
      out.push_back(cp);
      i += len;
    }
  }
  return out;
}

void AppendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

size_t Utf16Length(std::string_view s) {
  size_t n = 0;
  for (char32_t cp : DecodeUtf8(s)) n += cp >= 0x10000 ? 2 : 1;
  return n;
}

bool IsJsWhitespace(char32_t c) {
  if (c <= 32) return c == 32 || (c >= 9 && c <= 13);
  return c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
         c == 0x202f || c == 0x205f || c == 0x3000 || c == 0xfeff;
}

std::string JsTrim(std::string_view s, bool left, bool right) {
  // Fast path for ASCII edges; fall back to decoding for multi-byte whitespace.
  std::vector<char32_t> cps = DecodeUtf8(s);
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && IsJsWhitespace(cps[b])) ++b;
  }
  if (right) {
    while (e > b && IsJsWhitespace(cps[e - 1])) --e;
  }
  if (b == 0 && e == cps.size()) return std::string(s);
  std::string out;
  for (size_t i = b; i < e; ++i) AppendUtf8(out, cps[i]);
  return out;
}

// ---- JSON / display ----

namespace {

void AppendJsonString(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (char32_t cp : DecodeUtf8(s)) {
    switch (cp) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default: {
        char buf[16];
        if (cp < 0x20) {
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
          out += buf;
        } else if (ensure_ascii && cp >= 0x7f) {
          // HF escapes UTF-16 code units, so astral characters become surrogate pairs.
          if (cp >= 0x10000) {
            char32_t v = cp - 0x10000;
            std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xd800 + (unsigned)(v >> 10),
                          0xdc00 + (unsigned)(v & 0x3ff));
          } else {
            std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
          }
          out += buf;
        } else {
          AppendUtf8(out, cp);
        }
      }
    }
  }
  out += '"';
}

void AppendJson(std::string& out, const Value& v, const JsonOptions& o, int depth) {
  if (depth > 512) Throw("tojson: value nested too deeply");
  std::string item_sep = o.has_separators ? o.item_separator : o.indent > 0 ? "," : ", ";
  std::string key_sep = o.has_separators ? o.key_separator : ": ";
  switch (v.kind()) {
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kUndefined:
      out += o.undefined_as_null ? "null" : "undefined";
      return;
    case Value::Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::kInt:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::kFloat:
      out += std::isfinite(v.as_float()) ? JsNumberToString(v.as_float()) : "null";
      return;
    case Value::Kind::kString:
      AppendJsonString(out, v.str(), o.ensure_ascii);
      return;
    case Value::Kind::kFunction:
      Throw("Cannot convert to JSON: function");
    default:
      break;
  }
  std::string indent_unit(std::max(0, o.indent), ' ');
  std::string base_pad = "\n";
  for (int i = 0; i < depth; ++i) base_pad += indent_unit;
  std::string child_pad = base_pad + indent_unit;
  if (v.is_array()) {
    const auto& items = v.array().items;
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += item_sep;
      if (o.indent > 0) out += child_pad;
      AppendJson(out, items[i], o, depth + 1);
    }
    if (o.indent > 0 && !items.empty()) out += base_pad;
    out += ']';
    return;
  }
  const Object& obj = v.is_object() ? v.object() : v.ns();
  std::vector<const std::pair<std::string, Value>*> entries;
  for (const auto& e : obj.entries()) entries.push_back(&e);
  if (o.sort_keys) {
    std::stable_sort(entries.begin(), entries.end(),
                     [](auto* a, auto* b) { return a->first < b->first; });
  }
  out += '{';
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) out += item_sep;
    if (o.indent > 0) out += child_pad;
    AppendJsonString(out, entries[i]->first, o.ensure_ascii);
    out += key_sep;
    AppendJson(out, entries[i]->second, o, depth + 1);
  }
  if (o.indent > 0 && !entries.empty()) out += base_pad;
  out += '}';
}

}  // namespace

std::string ToJson(const Value& v, const JsonOptions& options) {
  std::string out;
  AppendJson(out, v, options, 0);
  return out;
}

std::string ToDisplayString(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "undefined";
    case Value::Kind::kNone:
      return "null";
    case Value::Kind::kBool:
      return v.as_bool() ? "true" : "false";
    case Value::Kind::kInt:
      return std::to_string(v.as_int());
    case Value::Kind::kFloat:
      return FloatToString(v.as_float());
    case Value::Kind::kString:
      return v.str();
    case Value::Kind::kFunction:
      return "[function " + v.function().name + "]";
    default: {
      JsonOptions o;
      o.undefined_as_null = false;
      return ToJson(v, o);
    }
  }
}

std::string JsValueString(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kFloat:
      return JsNumberToString(v.as_float());
    case Value::Kind::kArray: {
      std::string out;
      const auto& items = v.array().items;
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += ',';
        out += ToDisplayString(items[i]);
      }
      return out;
    }
    case Value::Kind::kObject:
    case Value::Kind::kNamespace:
      return "[object Map]";
    default:
      return ToDisplayString(v);
  }
}

// ---- equality and ordering ----

namespace {

// JS ToNumber for the primitive operands of loose equality.
double JsToNumber(const Value& v) {
  if (v.is_bool()) return v.as_bool() ? 1 : 0;
  if (v.is_number()) return v.as_number();
  if (v.is_string()) {
    std::string t = JsTrim(v.str(), true, true);
    if (t.empty()) return 0;
    char* end = nullptr;
    double d = std::strtod(t.c_str(), &end);
    if (end != t.c_str() + t.size()) return std::nan("");
    return d;
  }
  return std::nan("");
}

bool IsContainer(const Value& v) {
  return v.identity() != nullptr;
}

}  // namespace

bool LooseEquals(const Value& a, const Value& b) {
  bool a_nullish = a.is_none() || a.is_undefined();
  bool b_nullish = b.is_none() || b.is_undefined();
  if (a_nullish || b_nullish) return a_nullish && b_nullish;
  if (IsContainer(a) || IsContainer(b)) return a.identity() == b.identity();
  if (a.is_string() && b.is_string()) return a.str() == b.str();
  if (a.is_bool() && b.is_bool()) return a.as_bool() == b.as_bool();
  return JsToNumber(a) == JsToNumber(b);
}

bool StrictEquals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.as_number() == b.as_number();
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kBool:
      return a.as_bool() == b.as_bool();
    case Value::Kind::kString:
      return a.str() == b.str();
    default:
      return a.identity() == b.identity();
  }
}

int Compare(const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_none() && b.is_none()) return 0;
  if (a.is_undefined() && b.is_undefined()) return 0;
  auto numeric = [](const Value& v) { return v.is_number() || v.is_bool(); };
  if (numeric(a) && numeric(b)) {
    double x = JsToNumber(a), y = JsToNumber(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    if (case_sensitive) return a.str().compare(b.str()) < 0 ? -1 : a.str() == b.str() ? 0 : 1;
    std::string x = a.str(), y = b.str();
    for (auto& c : x) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (auto& c : y) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return x < y ? -1 : x > y ? 1 : 0;
  }
  Throw("Cannot compare ", a.TypeName(), " with ", b.TypeName());
}

// ---- JSON input ----

namespace {

template <typename Json>
Value FromJsonImpl(const Json& j, int depth) {
  if (depth > 512) Throw("input JSON nested too deeply");
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::None();
    case nlohmann::json::value_t::boolean:
      return Value::Bool(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value::Int(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::Float(static_cast<double>(u));
      return Value::Int(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: {
      // JSON has one number type; HF (JavaScript) makes every integral number an integer.
      double d = j.template get<double>();
      if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.0e15) {
        return Value::Int(static_cast<int64_t>(d));
      }
      return Value::Float(d);
    }
    case nlohmann::json::value_t::string:
      return Value::Str(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(FromJsonImpl(e, depth + 1));
      return Value::MakeArray(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      auto obj = std::make_shared<Object>();
      for (auto it = j.begin(); it != j.end(); ++it) {
        obj->Set(it.key(), FromJsonImpl(it.value(), depth + 1));
      }
      return Value::MakeObject(std::move(obj));
    }
    default:
      Throw("unsupported JSON value");
  }
}

}  // namespace

Value FromJson(const nlohmann::ordered_json& j) {
  return FromJsonImpl(j, 0);
}
Value FromJson(const nlohmann::json& j) {
  return FromJsonImpl(j, 0);
}

}  // namespace moeserve::chat::jinja
