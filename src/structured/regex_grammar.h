// Regex -> grammar: the regular-expression subset vLLM's guided_regex and JSON Schema's
// `pattern` use (ECMAScript / Python syntax).
//
// Supported: literals and escapes (\n \t \r \f \v \0 \xHH \uHHHH, escaped punctuation), `.`,
// classes [...] with ranges and negation, \d \w \s \D \W \S, groups (...) and (?:...),
// alternation, quantifiers * + ? {n} {n,} {n,m} (a lazy `?` suffix changes nothing here), and
// ^ / $ at the ends. Not supported (a ConstraintError names it): backreferences, lookaround,
// named groups, ranges of non-ASCII characters. `.` and negated classes match any well-formed
// non-ASCII character.
#pragma once
#include <string_view>

#include "structured/grammar.h"

namespace gs::structured {

// Adds a rule deriving exactly the strings `regex` matches (wholly; ^ and $ are implied).
// `allowed`, when given, restricts every byte the regex can produce (JSON string content).
uint32_t add_regex_rule(GrammarBuilder& b, std::string_view regex, const ByteSet* allowed = nullptr,
                        std::string_view name = "regex");

Grammar regex_grammar(std::string_view regex, const GrammarLimits& limits = {});

}  // namespace gs::structured
