#include "structured/grammar_compiler.h"

#include "structured/ebnf_grammar.h"
#include "structured/json_schema_grammar.h"
#include "structured/regex_grammar.h"

namespace gs::structured {

std::string ConstraintSpec::cache_key() const {
  std::string key = std::to_string(static_cast<int>(kind)) + (any_whitespace ? "w" : "c") + ":" + text;
  for (const auto& c : choices) key += "\x1f" + std::to_string(c.size()) + ":" + c;
  return key;
}

Grammar build_grammar(const ConstraintSpec& spec, const GrammarLimits& limits) {
  JsonGrammarOptions opts{spec.any_whitespace};
  switch (spec.kind) {
    case ConstraintSpec::Kind::kJsonSchema: return json_schema_grammar(spec.text, opts, limits);
    case ConstraintSpec::Kind::kJsonObject: return json_object_grammar(opts, limits);
    case ConstraintSpec::Kind::kRegex: return regex_grammar(spec.text, limits);
    case ConstraintSpec::Kind::kChoice: return choice_grammar(spec.choices, limits);
    case ConstraintSpec::Kind::kGrammar: return ebnf_grammar(spec.text, limits);
  }
  return json_object_grammar(opts, limits);
}

GrammarCompiler::GrammarCompiler(std::shared_ptr<const TokenVocab> vocab, size_t max_cached, GrammarLimits limits)
    : vocab_(std::move(vocab)), max_cached_(max_cached), limits_(limits) {}

std::shared_ptr<const CompiledGrammar> GrammarCompiler::compile(const ConstraintSpec& spec) {
  std::string key = spec.cache_key();
  {
    std::lock_guard lock(mu_);
    if (auto it = cache_.find(key); it != cache_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.second);
      return it->second.first;
    }
  }
  auto compiled = std::make_shared<const CompiledGrammar>(build_grammar(spec, limits_), vocab_);
  // Building the mask cache here keeps it off the engine thread (a cold entry costs a walk of
  // the vocabulary); grammars past the cap build their entries as requests reach them.
  if (compiled->automaton().num_positions() <= limits_.max_eager_positions) compiled->warm();
  std::lock_guard lock(mu_);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second.first;
  lru_.push_front(key);
  cache_[key] = {compiled, lru_.begin()};
  while (cache_.size() > max_cached_) {
    cache_.erase(lru_.back());
    lru_.pop_back();
  }
  return compiled;
}

}  // namespace gs::structured
