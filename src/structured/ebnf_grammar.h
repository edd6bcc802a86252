// EBNF (GBNF, the dialect of llama.cpp that xgrammar and vLLM's `grammar` accept) -> grammar,
// and choice -> grammar.
//
//   root   ::= item ("," item)*          # the start rule is `root`
//   item   ::= "lit\n" | [a-z0-9_]+ | name | (a | b)? c{2,5} | .
//
// Literals with \n \t \r \\ \" \xHH \uHHHH escapes, byte classes with ranges and ^, rule
// references (defined anywhere), groups, * + ? {m} {m,} {m,n}, `.` (any character), # comments.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "structured/grammar.h"

namespace gs::structured {

Grammar ebnf_grammar(std::string_view text, const GrammarLimits& limits = {});
// Exactly one of `choices` (guided_choice / structured_outputs.choice).
Grammar choice_grammar(const std::vector<std::string>& choices, const GrammarLimits& limits = {});

}  // namespace gs::structured
