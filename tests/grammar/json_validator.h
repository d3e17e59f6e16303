// A small JSON Schema validator written independently of the grammar front end (the test's
// reference): the keywords json_schema.h supports, checked on parsed JSON values. Patterns go
// through PCRE2 (search semantics, as JSON Schema says); formats are checked by hand.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "test_util.h"

namespace moeserve::grammar::testing {

using Json = nlohmann::ordered_json;

class JsonValidator {
 public:
  explicit JsonValidator(const Json& root) : root_(root) {}
  bool Valid(const Json& v) const { return Check(root_, v); }

 private:
  static size_t CodePoints(const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  }
  static bool Digits(const std::string& s, size_t at, size_t n) {
    if (at + n > s.size()) return false;
    for (size_t i = at; i < at + n; ++i)
      if (s[i] < '0' || s[i] > '9') return false;
    return true;
  }
  static int Num(const std::string& s, size_t at, size_t n) { return std::stoi(s.substr(at, n)); }
  static bool Date(const std::string& s) {
    static const int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (s.size() != 10 || !Digits(s, 0, 4) || s[4] != '-' || !Digits(s, 5, 2) || s[7] != '-' ||
        !Digits(s, 8, 2))
      return false;
    const int y = Num(s, 0, 4), m = Num(s, 5, 2), d = Num(s, 8, 2);
    const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m >= 1 && m <= 12 && d >= 1 && d <= (m == 2 && !leap ? 28 : kDays[m - 1]);
  }
  static bool Time(const std::string& s) {  // RFC 3339 full-time, offset required
    if (s.size() < 9 || !Digits(s, 0, 2) || s[2] != ':' || !Digits(s, 3, 2) || s[5] != ':' ||
        !Digits(s, 6, 2) || Num(s, 0, 2) > 23 || Num(s, 3, 2) > 59 || Num(s, 6, 2) > 60)
      return false;
    size_t i = 8;
    if (s[i] == '.') {
      const size_t start = ++i;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
      if (i == start) return false;
    }
    if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) return i + 1 == s.size();
    return s.size() == i + 6 && (s[i] == '+' || s[i] == '-') && Digits(s, i + 1, 2) &&
           s[i + 3] == ':' && Digits(s, i + 4, 2) && Num(s, i + 1, 2) <= 23 &&
           Num(s, i + 4, 2) <= 59;
  }
  static bool Format(const std::string& f, const std::string& s) {
    if (f == "date") return Date(s);
    if (f == "time") return Time(s);
    if (f == "date-time") {
      const size_t t = s.find_first_of("Tt");
      return t == 10 && Date(s.substr(0, 10)) && Time(s.substr(11));
    }
    if (f == "uuid") {
      if (s.size() != 36) return false;
      for (size_t i = 0; i < s.size(); ++i) {
        const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash != (s[i] == '-') || (!dash && !std::isxdigit(static_cast<unsigned char>(s[i]))))
          return false;
      }
      return true;
    }
    if (f == "email") {
      const size_t at = s.find('@');
      return at != std::string::npos && at > 0 && s.find('@', at + 1) == std::string::npos &&
             s.find('.', at) != std::string::npos && s.back() != '.' && s[at + 1] != '.' &&
             s.find(' ') == std::string::npos && s.find("..") == std::string::npos;
    }
    if (f == "ipv4") {
      int parts = 0, value = -1, digits = 0;
      for (size_t i = 0; i <= s.size(); ++i) {
        if (i == s.size() || s[i] == '.') {
          if (digits == 0 || value > 255 || (digits > 1 && s[i - digits] == '0')) return false;
          ++parts, value = -1, digits = 0;
        } else if (s[i] >= '0' && s[i] <= '9' && digits < 3) {
          value = (value < 0 ? 0 : value * 10) + (s[i] - '0');
          ++digits;
        } else {
          return false;
        }
      }
      return parts == 4;
    }
    return true;  // other formats are annotations
  }
  static bool TypeIs(const std::string& t, const Json& v) {
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    if (t == "string") return v.is_string();
    if (t == "integer") return v.is_number_integer();
    if (t == "number") return v.is_number();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    return false;
  }

  bool Check(const Json& s, const Json& v) const {
    if (s.is_boolean()) return s.get<bool>();
    if (s.value("nullable", false) && v.is_null()) return true;
    if (s.contains("$ref"))
      return Check(root_.at(Json::json_pointer(s["$ref"].get<std::string>().substr(1))), v);
    if (s.contains("allOf"))
      for (const Json& p : s["allOf"])
        if (!Check(p, v)) return false;
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      int matches = 0;
      for (const Json& p : s[key]) matches += Check(p, v);
      if (matches == 0 || (std::string(key) == "oneOf" && matches != 1)) return false;
    }
    if (s.contains("const") && s["const"] != v) return false;
    if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end())
      return false;
    if (s.contains("type")) {
      bool any = false;
      if (s["type"].is_array()) {
        for (const Json& t : s["type"]) any = any || TypeIs(t.get<std::string>(), v);
      } else {
        any = TypeIs(s["type"].get<std::string>(), v);
      }
      if (!any) return false;
    }
    if (v.is_object()) {
      for (const Json& r : s.value("required", Json::array()))
        if (!v.contains(r.get<std::string>())) return false;
      const Json props = s.value("properties", Json::object());
      for (const auto& [k, x] : v.items()) {
        if (props.contains(k)) {
          if (!Check(props[k], x)) return false;
        } else if (s.contains("additionalProperties")) {
          if (!Check(s["additionalProperties"], x)) return false;
        }
      }
    }
    if (v.is_array()) {
      const bool tuple = s.contains("items") && s["items"].is_array();  // draft 4-7 tuples
      const Json prefix = tuple ? s["items"] : s.value("prefixItems", Json::array());
      for (size_t i = 0; i < v.size(); ++i) {
        const Json item_schema = i < prefix.size() ? prefix[i]
                                 : tuple           ? Json(true)
                                                   : s.value("items", Json(true));
        if (!Check(item_schema, v[i])) return false;
      }
      if (v.size() < s.value("minItems", size_t{0})) return false;
      if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
    }
    if (v.is_string()) {
      const std::string& str = v.get_ref<const std::string&>();
      if (CodePoints(str) < s.value("minLength", size_t{0})) return false;
      if (s.contains("maxLength") && CodePoints(str) > s["maxLength"].get<size_t>()) return false;
      if (s.contains("pattern") && !Pcre(s["pattern"].get<std::string>(), 0, false).Match(str))
        return false;
      if (s.contains("format") && !Format(s["format"].get<std::string>(), str)) return false;
    }
    if (v.is_number()) {
      const double x = v.get<double>();
      if (s.contains("minimum") && x < s["minimum"].get<double>()) return false;
      if (s.contains("maximum") && x > s["maximum"].get<double>()) return false;
      if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>()) return false;
      if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>()) return false;
    }
    return true;
  }

  const Json& root_;
};

}  // namespace moeserve::grammar::testing
