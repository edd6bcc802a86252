// Shared helpers for the engine unit tests: render a template string with JSON variables.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

#include "tokenizer/jinja/template.h"

namespace gs::jinja::test {

inline std::string render(const std::string& source,
                          const nlohmann::ordered_json& vars = nlohmann::ordered_json::object()) {
  Dict d;
  for (const auto& [k, v] : vars.items()) d.emplace_back(k, Value::from_json(v));
  return Template(source).render(d);
}

}  // namespace gs::jinja::test
