// JSON Schema -> grammar, for response_format json_schema, structured_outputs.json, guided_json
// and tool-call arguments.
//
// Supported (as vLLM's default backend): type (and lists of types), enum, const, properties in
// their declared order with required / optional members, additionalProperties (false unless
// given, as xgrammar's strict mode), items, prefixItems, minItems / maxItems, $ref into $defs /
// definitions / the root, anyOf / oneOf (as alternatives), a one-element allOf, string
// minLength / maxLength / pattern / format (date-time, date, time, email, uuid, ipv4, uri,
// hostname), integer minimum / maximum / exclusive bounds, number bounds that are non-negative
// integers. Annotations (title, description, default, examples, ...) are ignored. Any other
// validation keyword gives a ConstraintError naming it.
#pragma once
#include <string_view>

#include "structured/grammar.h"

namespace gs::structured {

struct JsonGrammarOptions {
  bool any_whitespace = true;  // whitespace between tokens (vLLM's default)
};

// `schema_text`: the schema as JSON text (its property order is the output's order).
Grammar json_schema_grammar(std::string_view schema_text, const JsonGrammarOptions& opts = {},
                            const GrammarLimits& limits = {});
// Any JSON object (response_format json_object).
Grammar json_object_grammar(const JsonGrammarOptions& opts = {}, const GrammarLimits& limits = {});

}  // namespace gs::structured
