// Reading the JSON files of a model directory, with errors that name the file.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string_view>

namespace gs {

// Parses `path`; throws gs::Error naming the file when it is missing or is not valid JSON.
nlohmann::json read_json_file(const std::filesystem::path& path);

// Whether object `j` has `key` with a non-null value (HF writes unset fields as null).
bool json_is_set(const nlohmann::json& j, std::string_view key);

// Typed field access: `key` of object `j` (from `file`) or `fallback` when absent or null.
// A present value of the wrong type throws gs::Error naming the file, the key and the type.
int json_int(const nlohmann::json& j, std::string_view key, int fallback, const std::filesystem::path& file);
double json_number(const nlohmann::json& j, std::string_view key, double fallback, const std::filesystem::path& file);
bool json_bool(const nlohmann::json& j, std::string_view key, bool fallback, const std::filesystem::path& file);
// A required positive integer.
int json_required_int(const nlohmann::json& j, std::string_view key, const std::filesystem::path& file);

}  // namespace gs
