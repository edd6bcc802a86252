// Implements server/json_fields.h.
#include "server/json_fields.h"

#include <cmath>

#include <fmt/format.h>

#include "server/api_error.h"

namespace gs::fields {
namespace {

std::string type_name(const json& v) { return v.type_name(); }

int64_t as_int(const json& v, const char* key, int64_t lo, int64_t hi) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi) || (lo > 0 && u < static_cast<uint64_t>(lo)))
      bad_param(key, fmt::format("'{}' is {}, outside the valid range [{}, {}]", key, u, lo, hi));
    return static_cast<int64_t>(u);
  }
  if (!v.is_number_integer())
    bad_param(key, fmt::format("'{}' must be an integer, got {}", key, v.is_number() ? v.dump() : type_name(v)));
  int64_t i = v.get<int64_t>();
  if (i < lo || i > hi) bad_param(key, fmt::format("'{}' is {}, outside the valid range [{}, {}]", key, i, lo, hi));
  return i;
}

}  // namespace

bool present(const json& body, const char* key) {
  auto it = body.find(key);
  return it != body.end() && !it->is_null();
}

bool get_bool(const json& body, const char* key, bool def) {
  if (!present(body, key)) return def;
  const json& v = body.at(key);
  if (!v.is_boolean()) bad_param(key, fmt::format("'{}' must be a boolean, got {}", key, type_name(v)));
  return v.get<bool>();
}

double get_number(const json& body, const char* key, double def, double lo, double hi) {
  if (!present(body, key)) return def;
  const json& v = body.at(key);
  if (!v.is_number()) bad_param(key, fmt::format("'{}' must be a number, got {}", key, type_name(v)));
  double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi)
    bad_param(key, fmt::format("'{}' is {}, outside the valid range [{}, {}]", key, v.dump(), lo, hi));
  return d;
}

int64_t get_int(const json& body, const char* key, int64_t def, int64_t lo, int64_t hi) {
  if (!present(body, key)) return def;
  return as_int(body.at(key), key, lo, hi);
}

std::optional<int64_t> get_optional_int(const json& body, const char* key, int64_t lo, int64_t hi) {
  if (!present(body, key)) return std::nullopt;
  return as_int(body.at(key), key, lo, hi);
}

std::string get_string(const json& body, const char* key, const std::string& def) {
  if (!present(body, key)) return def;
  const json& v = body.at(key);
  if (!v.is_string()) bad_param(key, fmt::format("'{}' must be a string, got {}", key, type_name(v)));
  return v.get<std::string>();
}

std::vector<std::string> get_string_or_list(const json& body, const char* key, size_t max_items) {
  if (!present(body, key)) return {};
  const json& v = body.at(key);
  if (v.is_string()) return {v.get<std::string>()};
  if (!v.is_array())
    bad_param(key, fmt::format("'{}' must be a string or a list of strings, got {}", key, type_name(v)));
  if (v.size() > max_items)
    bad_param(key, fmt::format("'{}' has {} items; at most {} are allowed", key, v.size(), max_items));
  std::vector<std::string> out;
  for (const json& s : v) {
    if (!s.is_string()) bad_param(key, fmt::format("every item of '{}' must be a string", key));
    if (s.get_ref<const std::string&>().empty())
      bad_param(key, fmt::format("'{}' must not contain empty strings", key));
    out.push_back(s.get<std::string>());
  }
  return out;
}

std::vector<int> get_int_list(const json& body, const char* key, int64_t lo, int64_t hi, size_t max_items) {
  if (!present(body, key)) return {};
  const json& v = body.at(key);
  if (!v.is_array()) bad_param(key, fmt::format("'{}' must be a list of integers", key));
  if (v.size() > max_items)
    bad_param(key, fmt::format("'{}' has {} items; at most {} are allowed", key, v.size(), max_items));
  std::vector<int> out;
  for (const json& x : v) out.push_back(static_cast<int>(as_int(x, key, lo, hi)));
  return out;
}

}  // namespace gs::fields
