// Implements spec/speculative_config.h (SpeculativeConfig).
#include "spec/speculative_config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace gs {

namespace {

using nlohmann::json;

constexpr const char* kValidKeys = "method, num_speculative_tokens, prompt_lookup_max, prompt_lookup_min, model";
constexpr const char* kValidMethods = "ngram, draft_model";
constexpr int kMaxSpeculativeTokens = 32;

int int_value(const std::string& key, const json& v, int lo, int hi) {
  GS_CHECK(v.is_number_integer() && v.get<long long>() >= lo && v.get<long long>() <= hi,
           "--speculative-config '{}' must be an integer in [{}, {}], got {}", key, lo, hi, v.dump());
  return v.get<int>();
}

void apply_key(SpeculativeConfig& c, const std::string& key, const json& v) {
  if (key == "method") {
    GS_CHECK(v.is_string(), "--speculative-config 'method' must be a string ({}), got {}", kValidMethods, v.dump());
    c.method = v.get<std::string>();
    GS_CHECK(c.method == "ngram" || c.method == "draft_model",
             "--speculative-config 'method' must be one of {}; got '{}'", kValidMethods, c.method);
  } else if (key == "num_speculative_tokens") {
    c.num_speculative_tokens = int_value(key, v, 1, kMaxSpeculativeTokens);
  } else if (key == "prompt_lookup_max") {
    c.prompt_lookup_max = int_value(key, v, 1, 1024);
  } else if (key == "prompt_lookup_min") {
    c.prompt_lookup_min = int_value(key, v, 1, 1024);
  } else if (key == "model") {
    GS_CHECK(v.is_string() && !v.get<std::string>().empty(),
             "--speculative-config 'model' must be a model directory or a preset name, got {}", v.dump());
    c.model = v.get<std::string>();
  } else {
    fail("unknown --speculative-config key '{}': valid keys are {}", key, kValidKeys);
  }
}

}  // namespace

SpeculativeConfig SpeculativeConfig::parse(const std::string& json_text) {
  if (json_text.empty()) return {};
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  GS_CHECK(!j.is_discarded(), "--speculative-config is not valid JSON: '{}'", json_text);
  GS_CHECK(j.is_object(), "--speculative-config must be a JSON object with keys {}, got '{}'", kValidKeys, json_text);
  SpeculativeConfig c;
  if (j.empty()) return c;
  for (const auto& [key, value] : j.items()) apply_key(c, key, value);
  GS_CHECK(c.enabled(), "--speculative-config needs 'method' ({})", kValidMethods);
  // vLLM's n-gram defaults: both bounds 5, or the one given for both.
  if (c.method == "ngram") {
    if (c.prompt_lookup_max == 0 && c.prompt_lookup_min == 0) c.prompt_lookup_max = c.prompt_lookup_min = 5;
    if (c.prompt_lookup_min == 0) c.prompt_lookup_min = c.prompt_lookup_max;
    if (c.prompt_lookup_max == 0) c.prompt_lookup_max = c.prompt_lookup_min;
  }
  c.validate();
  return c;
}

void SpeculativeConfig::validate() const {
  if (!enabled()) return;
  GS_CHECK(method == "ngram" || method == "draft_model", "--speculative-config 'method' must be one of {}; got '{}'",
           kValidMethods, method);
  GS_CHECK(num_speculative_tokens >= 1 && num_speculative_tokens <= kMaxSpeculativeTokens,
           "--speculative-config needs 'num_speculative_tokens' in [1, {}], got {}", kMaxSpeculativeTokens,
           num_speculative_tokens);
  if (method == "ngram") {
    GS_CHECK(model.empty(), "--speculative-config: 'model' is for method draft_model, not ngram");
    GS_CHECK(prompt_lookup_min >= 1 && prompt_lookup_min <= prompt_lookup_max,
             "--speculative-config needs 1 <= prompt_lookup_min <= prompt_lookup_max, got min {} max {}",
             prompt_lookup_min, prompt_lookup_max);
  } else {
    GS_CHECK(!model.empty(), "--speculative-config method draft_model needs 'model' (a model directory or preset)");
    GS_CHECK(prompt_lookup_max == 0 && prompt_lookup_min == 0,
             "--speculative-config: prompt_lookup_max/min are for method ngram, not draft_model");
  }
}

}  // namespace gs
