// Parses an untrusted request body into JSON, refusing what would be costly or ambiguous:
// invalid UTF-8, nesting deeper than a limit, numbers that overflow, non-object bodies.
#pragma once
#include <nlohmann/json.hpp>

#include <string_view>

namespace gs {

// Throws ApiError(400) with a message naming the problem. `max_depth` bounds [ / { nesting.
nlohmann::json parse_json_body(std::string_view body, int max_depth = 64);
// The same, keeping the key order (chat messages and tools); parse a body once and convert
// (nlohmann::json(ordered)) rather than parse it twice.
nlohmann::ordered_json parse_ordered_json_body(std::string_view body, int max_depth = 64);

}  // namespace gs
