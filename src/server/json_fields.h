// Typed, range-checked reads of optional request fields. Each throws ApiError(400) naming the
// field, the value's problem and the valid range; an absent or null field gives the default.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gs::fields {

using nlohmann::json;

bool present(const json& body, const char* key);  // present and not null
bool get_bool(const json& body, const char* key, bool def);
double get_number(const json& body, const char* key, double def, double lo, double hi);
int64_t get_int(const json& body, const char* key, int64_t def, int64_t lo, int64_t hi);
std::optional<int64_t> get_optional_int(const json& body, const char* key, int64_t lo, int64_t hi);
std::string get_string(const json& body, const char* key, const std::string& def);
// A string or a list of strings (OpenAI's "stop"); at most `max_items`.
std::vector<std::string> get_string_or_list(const json& body, const char* key, size_t max_items);
std::vector<int> get_int_list(const json& body, const char* key, int64_t lo, int64_t hi, size_t max_items);

}  // namespace gs::fields
