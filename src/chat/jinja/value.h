// Runtime values of the Jinja interpreter. The semantics follow @huggingface/jinja (the reference
// the chat-template tests compare against), which differs from Python Jinja2 in places; those
// places are listed in chat_template.h.
//
// Containers are shared by reference (like Python and JS objects), so `ns.x = ...` on a namespace
// is visible through every copy of the value. Values never cross threads: each Render call builds
// its own.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace moeserve::chat::jinja {

class Value;
class Interpreter;

struct Array {
  std::vector<Value> items;
  bool is_tuple = false;  // `(a, b)` literals; HF's `is iterable` is false for them
};

// Insertion-ordered string-keyed map (Python dicts and JSON objects keep key order).
class Object {
 public:
  const Value* Find(std::string_view key) const;
  void Set(const std::string& key, Value value);
  size_t size() const;
  const std::vector<std::pair<std::string, Value>>& entries() const;

 private:
  std::vector<std::pair<std::string, Value>> entries_;
  std::unordered_map<std::string, size_t> index_;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> kwargs;
  // The `caller` of a {% call %} block when this call comes from one (else undefined).
  std::shared_ptr<const Value> caller;
  const Value* Kwarg(std::string_view name) const;
  // positional[i] if given, else kwarg `name`, else nullptr.
  const Value* Get(size_t i, std::string_view name) const;
};

using NativeFunction = std::function<Value(Interpreter&, const CallArgs&)>;

struct Function {
  std::string name;
  NativeFunction fn;
};

struct UndefinedTag {
  bool operator==(const UndefinedTag&) const = default;
};
struct NamespaceRef {
  std::shared_ptr<Object> object;
};

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kArray,
    kObject,
    kNamespace,
    kFunction
  };

  Value() : v_(UndefinedTag{}) {}
  static Value None() { return Value(nullptr); }
  static Value Bool(bool b) { return Value(b); }
  static Value Int(int64_t i) { return Value(i); }
  static Value Float(double d) { return Value(d); }
  static Value Str(std::string s) {
    return Value(std::make_shared<const std::string>(std::move(s)));
  }
  static Value MakeArray(std::vector<Value> items = {}, bool is_tuple = false);
  static Value MakeObject(std::shared_ptr<Object> object = nullptr);
  static Value MakeNamespace(std::shared_ptr<Object> object);
  static Value MakeFunction(std::string name, NativeFunction fn);

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_array() const { return kind() == Kind::kArray; }
  bool is_object() const { return kind() == Kind::kObject; }
  bool is_namespace() const { return kind() == Kind::kNamespace; }
  bool is_function() const { return kind() == Kind::kFunction; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  double as_number() const { return is_int() ? static_cast<double>(as_int()) : as_float(); }
  const std::string& str() const { return *std::get<StrPtr>(v_); }
  Array& array() const { return *std::get<ArrPtr>(v_); }
  Object& object() const { return *std::get<ObjPtr>(v_); }
  Object& ns() const { return *std::get<NamespaceRef>(v_).object; }
  const Function& function() const { return *std::get<FnPtr>(v_); }
  // Identity of a container (for JS reference equality), nullptr for scalars.
  const void* identity() const;

  const char* TypeName() const;

 private:
  using StrPtr = std::shared_ptr<const std::string>;
  using ArrPtr = std::shared_ptr<Array>;
  using ObjPtr = std::shared_ptr<Object>;
  using FnPtr = std::shared_ptr<const Function>;
  template <typename T>
  explicit Value(T v) : v_(std::move(v)) {}

  std::variant<UndefinedTag, std::nullptr_t, bool, int64_t, double, StrPtr, ArrPtr, ObjPtr,
               NamespaceRef, FnPtr>
      v_;
};

// Python-like truthiness (empty containers and strings are false).
bool Truthy(const Value& v);

// `{{ v }}`: HF's toString (true -> "true", none/undefined print nothing at the statement level,
// containers print as JSON).
std::string ToDisplayString(const Value& v);

struct JsonOptions {
  int indent = 0;  // 0: single line
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool has_separators = false;
  std::string item_separator, key_separator;
  bool undefined_as_null = true;  // false when printing containers ("undefined")
};
std::string ToJson(const Value& v, const JsonOptions& options);

// JavaScript `String(x.value)`: what HF uses for `~`, string `+` and join (floats print without
// ".0", arrays join their elements with ",", mappings print "[object Map]").
std::string JsValueString(const Value& v);

// JavaScript Number.prototype.toString (what HF prints for floats inside JSON and joins).
std::string JsNumberToString(double d);
// HF FloatValue.toString: integral floats print with ".0".
std::string FloatToString(double d);

// `==` as HF evaluates it (JavaScript loose equality on the underlying values).
bool LooseEquals(const Value& a, const Value& b);
// `in`, `unique`, `equalto`: JavaScript strict equality on the underlying values.
bool StrictEquals(const Value& a, const Value& b);
// Ordering for sort/dictsort/min/max; throws on incomparable values.
int Compare(const Value& a, const Value& b, bool case_sensitive);

Value FromJson(const nlohmann::ordered_json& j);
Value FromJson(const nlohmann::json& j);

// UTF-8 helpers. Invalid bytes decode as U+FFFD one byte at a time.
std::vector<char32_t> DecodeUtf8(std::string_view s);
void AppendUtf8(std::string& out, char32_t cp);
// Length in UTF-16 code units (JS String.length, what HF's `length` returns).
size_t Utf16Length(std::string_view s);
// JavaScript's whitespace set (String.prototype.trim and the lexer's whitespace control).
bool IsJsWhitespace(char32_t cp);
std::string JsTrim(std::string_view s, bool left, bool right);

}  // namespace moeserve::chat::jinja
