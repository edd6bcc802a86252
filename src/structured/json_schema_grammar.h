// JSON Schema -> grammar, for response_format json_schema, structured_outputs.json, guided_json
// and tool-call arguments.
//
// Supported (as vLLM's default backend): type (and lists of types), enum, const, properties in
// their declared order with required / optional members, additionalProperties (false unless
// given, as xgrammar's strict mode), items, prefixItems, minItems / maxItems, $ref into $defs /
// definitions / the root, anyOf, oneOf (see below), a one-element allOf, string minLength /
// maxLength / pattern / format (date-time, date, time, email, uuid, ipv4, uri, hostname),
// minimum / maximum / exclusiveMinimum / exclusiveMaximum (draft 4 and draft 6 forms): exact for
// integers of either sign within 1e17 (a digit-by-digit range grammar), and for numbers when
// the bounds are whole numbers (the integer part bounded, the fraction free, the boundary value
// itself allowed only with an all-zero fraction when inclusive and only with a non-zero one above
// an exclusive minimum; bounded numbers have no exponent). Annotations (title, description,
// default, examples, ...) are ignored. Any other validation keyword (multipleOf among them) and
// a fractional bound on a number give a ConstraintError naming it.
//
// oneOf: a grammar union (anyOf) is exact when no value can match two alternatives, so oneOf
// compiles as anyOf where the alternatives are provably disjoint (schema_overlap.h: different
// types, distinct const / enum values, a discriminator property) and is refused, naming oneOf
// and the two alternatives, otherwise. xgrammar compiles oneOf as the anyOf union (an output can
// then match two alternatives and fail validation); llguidance refuses oneOf outright.
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
