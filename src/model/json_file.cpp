// Implements model/json_file.h.
#include "model/json_file.h"

#include <cstdint>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace gs {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json_file(const fs::path& path) {
  GS_CHECK(fs::is_regular_file(path), "{} not found", path.string());
  std::ifstream in(path, std::ios::binary);
  GS_CHECK(in, "cannot open {}", path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::exception& e) {  // parse_error, or out_of_range: a number that overflows
    fail("{} is not valid JSON: {}", path.string(), e.what());
  }
}

namespace {
const json* field(const json& j, std::string_view key, const fs::path& file) {
  GS_CHECK(j.is_object(), "{}: expected a JSON object at the top level", file.string());
  auto it = j.find(std::string(key));
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}
}  // namespace

int json_int(const json& j, std::string_view key, int fallback, const fs::path& file) {
  const json* v = field(j, key, file);
  if (!v) return fallback;
  GS_CHECK(v->is_number_integer(), "{}: '{}' must be an integer, got {}", file.string(), key, v->dump());
  // Range-checked: nlohmann's get<int> would narrow 2^32 + 512 to 512 without a word.
  const bool fits = v->is_number_unsigned() ? v->get<uint64_t>() <= uint64_t(INT32_MAX)
                                            : v->get<int64_t>() >= INT32_MIN && v->get<int64_t>() <= INT32_MAX;
  GS_CHECK(fits, "{}: '{}' is {}, outside the 32-bit range graphserve supports", file.string(), key, v->dump());
  return v->get<int>();
}

double json_number(const json& j, std::string_view key, double fallback, const fs::path& file) {
  const json* v = field(j, key, file);
  if (!v) return fallback;
  GS_CHECK(v->is_number(), "{}: '{}' must be a number, got {}", file.string(), key, v->dump());
  return v->get<double>();
}

bool json_bool(const json& j, std::string_view key, bool fallback, const fs::path& file) {
  const json* v = field(j, key, file);
  if (!v) return fallback;
  GS_CHECK(v->is_boolean(), "{}: '{}' must be true or false, got {}", file.string(), key, v->dump());
  return v->get<bool>();
}

bool json_is_set(const json& j, std::string_view key) {
  const auto it = j.find(key);
  return it != j.end() && !it->is_null();
}

int json_required_int(const json& j, std::string_view key, const fs::path& file) {
  const int v = json_int(j, key, -1, file);
  GS_CHECK(v > 0, "{}: '{}' must be a positive integer (missing or {})", file.string(), key, v);
  return v;
}

}  // namespace gs
