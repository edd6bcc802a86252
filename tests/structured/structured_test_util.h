// Shared fixtures of the structured tests: the Qwen2.5 vocabulary (151k tokens) and helpers that
// walk a grammar through token masks.
#pragma once
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "structured/grammar_compiler.h"
#include "structured/grammar_matcher.h"
#include "tokenizer/tokenizer.h"

namespace gs::test {

const Tokenizer& qwen_tokenizer();
std::shared_ptr<const structured::TokenVocab> qwen_vocab();
structured::GrammarCompiler& qwen_compiler();

// The token ids allowed by a mask.
std::vector<int32_t> allowed_tokens(const std::vector<uint32_t>& mask);

// structured::walk_grammar, failing the test on a mask that allows nothing or a masked token
// the matcher refuses. Returns the text, or nullopt if it did not end within `max_tokens`.
std::optional<std::string> walk(const std::shared_ptr<const structured::CompiledGrammar>& grammar, uint32_t seed,
                                int budget = 24, int max_tokens = 600);

}  // namespace gs::test
