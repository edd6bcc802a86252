// A JSON Schema validator for the tests (the keywords the constraint engine supports, with the
// standard's semantics: pattern searches, absent additionalProperties allows any, oneOf needs
// exactly one match). Returns "" when `value` validates, else what failed and where.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace gs::test {

std::string validate_json(const nlohmann::ordered_json& value, const nlohmann::ordered_json& schema);

}  // namespace gs::test
