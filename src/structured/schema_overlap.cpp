#include "structured/schema_overlap.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <optional>
#include <set>

namespace gs::structured {

namespace {

using Json = nlohmann::ordered_json;

enum : uint8_t {
  kNull = 1,
  kBool = 2,
  kInt = 4,
  kFrac = 8,  // numbers with a fractional part
  kString = 16,
  kObject = 32,
  kArray = 64,
  kAll = 127,
};

uint8_t type_bits(const std::string& t) {
  if (t == "null") return kNull;
  if (t == "boolean") return kBool;
  if (t == "integer") return kInt;
  if (t == "number") return kInt | kFrac;
  if (t == "string") return kString;
  if (t == "object") return kObject;
  if (t == "array") return kArray;
  return kAll;
}

uint8_t value_bits(const Json& v) {
  if (v.is_null()) return kNull;
  if (v.is_boolean()) return kBool;
  if (v.is_number()) return std::floor(v.get<double>()) == v.get<double>() ? kInt : kFrac;
  if (v.is_string()) return kString;
  if (v.is_object()) return kObject;
  return kArray;
}

bool share_value(const std::vector<Json>& a, const std::vector<Json>& b) {
  for (const auto& x : a)
    for (const auto& y : b)
      if (x == y) return true;
  return false;
}

struct Shape {
  uint8_t generated = kAll;  // types the alternative's grammar writes
  uint8_t admitted = kAll;   // types its schema accepts
  std::optional<std::vector<Json>> values;
  std::map<std::string, std::vector<Json>> discriminators;  // required properties with const / enum
  std::set<std::string> required;
  std::optional<std::set<std::string>> writes;  // the only property names generated
  std::optional<std::set<std::string>> allows;  // the only property names accepted
};

std::optional<std::vector<Json>> finite_values(const Json& s) {
  if (!s.is_object()) return std::nullopt;
  if (s.contains("const")) return std::vector<Json>{s["const"]};
  if (s.contains("enum") && s["enum"].is_array()) return std::vector<Json>(s["enum"].begin(), s["enum"].end());
  return std::nullopt;
}

// The types the compiler generates for a schema without const / enum (its type inference).
uint8_t generated_types(const Json& s) {
  if (s.contains("anyOf") || s.contains("oneOf") || s.contains("allOf")) return kAll;
  if (s.contains("type")) {
    if (s["type"].is_string()) return type_bits(s["type"].get<std::string>());
    uint8_t bits = 0;
    for (const auto& t : s["type"]) bits |= t.is_string() ? type_bits(t.get<std::string>()) : uint8_t(kAll);
    return bits;
  }
  if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) return kObject;
  if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems"))
    return kArray;
  if (s.contains("pattern") || s.contains("format") || s.contains("minLength") || s.contains("maxLength"))
    return kString;
  if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
      s.contains("exclusiveMaximum"))
    return kInt | kFrac;
  return kAll;
}

Shape shape_of(const Json& schema, const SchemaResolver& resolve) {
  const Json& s = resolve(schema);
  Shape sh;
  if (!s.is_object()) return sh;
  const bool combined = s.contains("anyOf") || s.contains("oneOf") || s.contains("allOf");
  if (s.contains("type") && !combined) sh.admitted = generated_types(s);
  sh.values = finite_values(s);
  if (sh.values) {
    uint8_t bits = 0;
    for (const auto& v : *sh.values) bits |= value_bits(v);
    sh.generated = bits & (s.contains("type") ? generated_types(s) : uint8_t(kAll));
    sh.admitted &= bits;
  } else {
    sh.generated = generated_types(s);
  }
  if (combined || !(sh.generated & kObject)) return sh;
  std::set<std::string> declared;
  if (s.contains("properties") && s["properties"].is_object())
    for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it) declared.insert(it.key());
  if (s.contains("required") && s["required"].is_array())
    for (const auto& r : s["required"])
      if (r.is_string()) sh.required.insert(r.get<std::string>());
  for (const auto& r : sh.required)
    if (s.contains("properties") && s["properties"].contains(r))
      if (auto v = finite_values(resolve(s["properties"][r]))) sh.discriminators[r] = *v;
  const bool extra = (s.contains("additionalProperties") && s["additionalProperties"] != false) ||
                     (!s.contains("properties") && !s.contains("additionalProperties") && sh.required.empty());
  if (!extra) {
    sh.writes = declared;
    sh.writes->insert(sh.required.begin(), sh.required.end());
  }
  if (s.contains("additionalProperties") && s["additionalProperties"] == false) sh.allows = declared;
  return sh;
}

// Why every output generated for `a` fails `b`'s schema, or "" if that is not shown.
std::string separated(const Shape& a, const Shape& b) {
  const uint8_t common = a.generated & b.admitted;
  if (!common) return "types";
  if (a.values && b.values && !share_value(*a.values, *b.values)) return "values";
  if (common != kObject) return "";
  for (const auto& [p, va] : a.discriminators)
    if (auto it = b.discriminators.find(p); it != b.discriminators.end() && !share_value(va, it->second))
      return "discriminator";
  if (a.writes)
    for (const auto& q : b.required)
      if (!a.writes->count(q)) return "required";
  if (b.allows)
    for (const auto& p : a.required)
      if (!b.allows->count(p)) return "forbidden";
  return "";
}

}  // namespace

std::string one_of_overlap(const std::vector<Json>& alternatives, const SchemaResolver& resolve) {
  std::vector<Shape> shapes;
  for (const auto& a : alternatives) shapes.push_back(shape_of(a, resolve));
  for (size_t i = 0; i < shapes.size(); ++i)
    for (size_t j = i + 1; j < shapes.size(); ++j)
      if (separated(shapes[i], shapes[j]).empty() || separated(shapes[j], shapes[i]).empty())
        return fmt::format(
            "alternatives {} and {} may both match one value (oneOf is enforced only where no value can "
            "match two alternatives: different types, distinct const / enum values, or a required "
            "property whose const / enum values differ or that the other never has); use anyOf if a value "
            "may match several",
            i, j);
  return "";
}

}  // namespace gs::structured
