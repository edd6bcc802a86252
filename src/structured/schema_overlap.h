// Whether a oneOf's alternatives can overlap: the schema compiler enforces oneOf exactly by
// compiling it as anyOf where no JSON value can match two alternatives, and refuses it
// otherwise (an output of one alternative must fail every other, which a grammar union cannot
// check in general).
//
// Decided pairwise and conservatively, per direction (an output generated for A fails B's
// schema under JSON Schema's own semantics), by any of:
//  - types: the types A's grammar generates and the types B's schema admits do not meet
//    (integer is part of number; a schema without `type`, `const` or `enum` admits every type);
//  - values: both are const / enum and share no value;
//  - for objects, a discriminator: a property required by both with const / enum values that
//    do not meet; a property B requires that A never writes (A's grammar writes only its
//    declared properties unless it allows additional ones); a property A requires that B
//    forbids (`additionalProperties: false` and not among B's properties).
// `$ref`s are followed; nested combinators count as "any type" (conservative).
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gs::structured {

// Follows `$ref` (returns the schema itself when it has none); throws ConstraintError.
using SchemaResolver = std::function<const nlohmann::ordered_json&(const nlohmann::ordered_json&)>;

// "" when the alternatives are pairwise provably disjoint, else which two may overlap and why.
std::string one_of_overlap(const std::vector<nlohmann::ordered_json>& alternatives, const SchemaResolver& resolve);

}  // namespace gs::structured
