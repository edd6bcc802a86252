#include "json_validator.h"

#include <cmath>
#include <regex>

namespace gs::test {

namespace {

using Json = nlohmann::ordered_json;

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool is_type(const Json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "string") return v.is_string();
  if (t == "integer")
    return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  if (t == "number") return v.is_number();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  return false;
}

const std::map<std::string, std::string>& formats() {
  static const std::map<std::string, std::string> f = {
      {"date", R"(^\d{4}-\d{2}-\d{2}$)"},
      {"time", R"(^\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$)"},
      {"date-time", R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$)"},
      {"email", R"(^[^@\s]+@[^@\s]+\.[a-zA-Z]{2,}$)"},
      {"uuid", R"(^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$)"},
      {"ipv4", R"(^(\d{1,3}\.){3}\d{1,3}$)"},
      {"uri", R"(^[a-zA-Z][a-zA-Z0-9+.\-]*:\S+$)"},
      {"hostname", R"(^[a-zA-Z0-9.\-]+$)"},
  };
  return f;
}

class Validator {
 public:
  explicit Validator(const Json& root) : root_(root) {}

  std::string check(const Json& v, const Json& s, const std::string& at) {
    if (s.is_boolean()) return s.get<bool>() ? "" : at + ": schema false";
    if (s.contains("$ref")) {
      std::string r = s["$ref"];
      const Json* t = &root_;
      for (size_t i = 2; i < r.size();) {
        size_t j = r.find('/', i);
        t = &(*t)[r.substr(i, j == std::string::npos ? std::string::npos : j - i)];
        i = j == std::string::npos ? r.size() : j + 1;
      }
      if (auto e = check(v, *t, at); !e.empty()) return e;
    }
    if (s.contains("type")) {
      bool ok = false;
      if (s["type"].is_array())
        for (const auto& t : s["type"]) ok |= is_type(v, t);
      else
        ok = is_type(v, s["type"]);
      if (!ok) return at + ": not of type " + s["type"].dump();
    }
    if (s.contains("const") && v != s["const"]) return at + ": not the const";
    if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end())
      return at + ": not in enum";
    if (s.contains("anyOf")) {
      bool any = false;
      for (const auto& sub : s["anyOf"]) any |= check(v, sub, at).empty();
      if (!any) return at + ": matches no anyOf branch";
    }
    if (s.contains("oneOf")) {
      int n = 0;
      for (const auto& sub : s["oneOf"]) n += check(v, sub, at).empty();
      if (n != 1) return at + ": matches " + std::to_string(n) + " oneOf branches";
    }
    if (s.contains("allOf"))
      for (const auto& sub : s["allOf"])
        if (auto e = check(v, sub, at); !e.empty()) return e;
    if (v.is_string()) return string(v.get<std::string>(), s, at);
    if (v.is_number()) return number(v.get<double>(), s, at);
    if (v.is_object()) return object(v, s, at);
    if (v.is_array()) return array(v, s, at);
    return "";
  }

 private:
  std::string string(const std::string& str, const Json& s, const std::string& at) {
    if (s.contains("minLength") && code_points(str) < s["minLength"].get<size_t>())
      return at + ": shorter than minLength";
    if (s.contains("maxLength") && code_points(str) > s["maxLength"].get<size_t>())
      return at + ": longer than maxLength";
    if (s.contains("pattern") && !std::regex_search(str, std::regex(s["pattern"].get<std::string>())))
      return at + ": does not match pattern";
    if (s.contains("format") && !std::regex_search(str, std::regex(formats().at(s["format"]))))
      return at + ": not a " + s["format"].get<std::string>();
    return "";
  }

  // Draft 6 numeric exclusive bounds, and draft 4's boolean ones (modifying minimum / maximum).
  std::string number(double x, const Json& s, const std::string& at) {
    const bool lo_strict = s.contains("exclusiveMinimum") && s["exclusiveMinimum"] == true;
    const bool hi_strict = s.contains("exclusiveMaximum") && s["exclusiveMaximum"] == true;
    if (s.contains("minimum") && (x < s["minimum"].get<double>() || (lo_strict && x == s["minimum"].get<double>())))
      return at + ": below minimum";
    if (s.contains("maximum") && (x > s["maximum"].get<double>() || (hi_strict && x == s["maximum"].get<double>())))
      return at + ": above maximum";
    if (s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_number() && x <= s["exclusiveMinimum"].get<double>())
      return at + ": not above exclusiveMinimum";
    if (s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_number() && x >= s["exclusiveMaximum"].get<double>())
      return at + ": not below exclusiveMaximum";
    return "";
  }

  std::string object(const Json& v, const Json& s, const std::string& at) {
    if (s.contains("required"))
      for (const auto& r : s["required"])
        if (!v.contains(r.get<std::string>())) return at + ": missing required " + r.dump();
    for (auto it = v.begin(); it != v.end(); ++it) {
      std::string where = at + "/" + it.key();
      if (s.contains("properties") && s["properties"].contains(it.key())) {
        if (auto e = check(it.value(), s["properties"][it.key()], where); !e.empty()) return e;
      } else if (s.contains("additionalProperties")) {
        if (auto e = check(it.value(), s["additionalProperties"], where); !e.empty()) return e;
      }
    }
    return "";
  }

  std::string array(const Json& v, const Json& s, const std::string& at) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return at + ": fewer than minItems";
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return at + ": more than maxItems";
    size_t prefix = s.contains("prefixItems") ? s["prefixItems"].size() : 0;
    for (size_t i = 0; i < v.size(); ++i) {
      std::string where = at + "/" + std::to_string(i);
      const Json* sub = i < prefix ? &s["prefixItems"][i] : (s.contains("items") ? &s["items"] : nullptr);
      if (sub)
        if (auto e = check(v[i], *sub, where); !e.empty()) return e;
    }
    return "";
  }

  const Json& root_;
};

}  // namespace

std::string validate_json(const Json& value, const Json& schema) { return Validator(schema).check(value, schema, "#"); }

}  // namespace gs::test
