// Implements server/json_body.h.
#include "server/json_body.h"

#include "server/api_error.h"

namespace gs {
namespace {

// Deepest [ / { nesting outside strings; stops counting once past `limit`. A pre-scan, so a
// hostile body is refused before the parser builds anything.
int nesting_depth(std::string_view s, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}')
      --depth;
  }
  return deepest;
}

template <typename Json>
Json parse_body(std::string_view body, int max_depth) {
  if (body.empty()) throw ApiError(400, "the request body is empty; send a JSON object");
  if (nesting_depth(body, max_depth) > max_depth)
    throw ApiError(400, "the request body nests deeper than " + std::to_string(max_depth) + " levels");
  Json j;
  try {
    j = Json::parse(body);  // validates UTF-8 and number ranges
  } catch (const nlohmann::json::exception& e) {
    throw ApiError(400, std::string("invalid JSON in the request body: ") + e.what());
  }
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return j;
}

}  // namespace

nlohmann::json parse_json_body(std::string_view body, int max_depth) {
  return parse_body<nlohmann::json>(body, max_depth);
}

nlohmann::ordered_json parse_ordered_json_body(std::string_view body, int max_depth) {
  return parse_body<nlohmann::ordered_json>(body, max_depth);
}

}  // namespace gs
