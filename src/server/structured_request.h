// The structured-output fields of a completions or chat request, as vLLM reads them:
//   response_format: {"type": "text" | "json_object" | "json_schema", "json_schema": {name, schema, strict}}
//   structured_outputs: {json | regex | choice | grammar | json_object, disable_any_whitespace}
//   guided_json / guided_regex / guided_choice / guided_grammar (vLLM's older spellings)
// At most one constraint per request; it is compiled on the calling thread (EngineClient::
// compile_constraint) and a constraint that cannot be compiled is a 400 naming the field.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/engine_client.h"
#include "structured/grammar_compiler.h"
#include "types/sampling_params.h"

namespace gs {

struct StructuredField {
  std::string field;  // the request field it came from (for errors)
  structured::ConstraintSpec spec;
};

// The request's constraint, or nullopt; throws ApiError(400) for malformed fields.
std::optional<StructuredField> parse_structured_fields(const nlohmann::ordered_json& body);
// Compiles `f` into params.grammar; throws ApiError(400) naming the field and the problem.
void apply_structured_field(const StructuredField& f, const EngineClient& client, SamplingParams& params);

}  // namespace gs
