// The fields a generation request may carry. Known-unsupported fields (structured output,
// tool choice, template kwargs, ...) get a 400 naming them instead of being silently ignored;
// fields nobody knows are ignored with one debug log line, as vLLM does.
#pragma once
#include <nlohmann/json.hpp>

#include "server/openai_request.h"

namespace gs {

// Throws ApiError(400) naming the first unsupported field set to a value other than its default.
void check_request_fields(const nlohmann::json& body, ApiKind kind);

}  // namespace gs
