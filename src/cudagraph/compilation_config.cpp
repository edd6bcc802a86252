// Implements cudagraph/compilation_config.h (CompilationConfig).
#include "cudagraph/compilation_config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace gs {

namespace {

using nlohmann::json;

constexpr const char* kValidKeys =
    "cudagraph_mode, cudagraph_capture_sizes, max_cudagraph_capture_size, compile_sizes, cache_dir, "
    "disable_compile_cache";

std::vector<int> positive_int_list(const std::string& key, const json& v) {
  GS_CHECK(v.is_array(), "compilation config '{}' must be a list of positive integers, got {}", key, v.dump());
  std::vector<int> out;
  for (const auto& e : v) {
    GS_CHECK(e.is_number_integer() && e.get<long long>() >= 1 && e.get<long long>() <= (1 << 20),
             "compilation config '{}': every entry must be an integer in [1, 1048576], got {}", key, e.dump());
    out.push_back(e.get<int>());
  }
  return out;
}

void apply_key(CompilationConfig& cfg, const std::string& key, const json& v) {
  if (key == "cudagraph_mode") {
    GS_CHECK(v.is_string(),
             "compilation config 'cudagraph_mode' must be a string (NONE, PIECEWISE, FULL, "
             "FULL_DECODE_ONLY, FULL_AND_PIECEWISE), got {}",
             v.dump());
    cfg.cudagraph_mode = parse_cudagraph_mode(v.get<std::string>());
  } else if (key == "cudagraph_capture_sizes") {
    cfg.cudagraph_capture_sizes = positive_int_list(key, v);
  } else if (key == "max_cudagraph_capture_size") {
    GS_CHECK(v.is_number_integer() && v.get<long long>() >= 0 && v.get<long long>() <= (1 << 20),
             "compilation config 'max_cudagraph_capture_size' must be an integer in [0, 1048576] "
             "(0: the default), got {}",
             v.dump());
    cfg.max_cudagraph_capture_size = v.get<int>();
  } else if (key == "compile_sizes") {
    cfg.compile_sizes = positive_int_list(key, v);
  } else if (key == "cache_dir") {
    GS_CHECK(v.is_string(), "compilation config 'cache_dir' must be a string (a directory), got {}", v.dump());
    cfg.cache_dir = v.get<std::string>();
  } else if (key == "disable_compile_cache") {
    GS_CHECK(v.is_boolean(), "compilation config 'disable_compile_cache' must be true or false, got {}", v.dump());
    cfg.disable_compile_cache = v.get<bool>();
  } else {
    fail("unknown compilation config key '{}': valid keys are {}", key, kValidKeys);
  }
}

}  // namespace

void CompilationConfig::apply_json(const std::string& json_text) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  GS_CHECK(!j.is_discarded(), "--compilation-config is not valid JSON: '{}'", json_text);
  GS_CHECK(j.is_object(), "--compilation-config must be a JSON object with keys {}, got '{}'", kValidKeys, json_text);
  CompilationConfig next = *this;  // all or nothing
  for (const auto& [key, value] : j.items()) apply_key(next, key, value);
  *this = std::move(next);
}

void CompilationConfig::apply_setting(const std::string& key, const std::string& value) {
  json v = json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) v = value;  // a bare string, as in -cc.cudagraph_mode=FULL
  apply_key(*this, key, v);
}

}  // namespace gs
