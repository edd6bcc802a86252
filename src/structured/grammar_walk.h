// Generates text under a grammar without a model: picks allowed tokens from each mask, random
// ones first and then (after `budget` tokens) ones that close strings, objects and arrays, until
// an end token. Used by `graphserve bench structured` (timing each mask) and the tests.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "structured/compiled_grammar.h"

namespace gs::structured {

struct WalkOptions {
  uint32_t seed = 0;
  int budget = 24;       // random tokens before closing ones are preferred
  int max_tokens = 600;  // give up (nullopt) after this many
};

struct WalkResult {
  std::optional<std::string> text;  // the generated text, if it ended
  std::string error;                // non-empty: a mask allowed nothing, or the matcher refused a masked token
  int tokens = 0;
};

// `on_mask(seconds)`, when given, receives the time of each fill_mask.
WalkResult walk_grammar(const std::shared_ptr<const CompiledGrammar>& grammar, const WalkOptions& opts,
                        const std::function<void(double)>& on_mask = {});

}  // namespace gs::structured
