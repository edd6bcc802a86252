// GrammarCompiler: constraint spec -> CompiledGrammar, cached by the spec's hash.
//
// Thread-safe; the server calls it on its HTTP threads, so compilation never runs on the engine
// thread and a constraint that fails to compile is a 400 before the request reaches the engine.
// Compiling includes building the mask cache (CompiledGrammar::warm) for grammars of up to
// GrammarLimits::max_eager_positions positions.
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "structured/compiled_grammar.h"
#include "structured/grammar.h"
#include "structured/token_vocab.h"

namespace gs::structured {

struct ConstraintSpec {
  enum class Kind { kJsonSchema, kJsonObject, kRegex, kChoice, kGrammar };
  Kind kind = Kind::kJsonObject;
  std::string text;                  // schema JSON, regex or EBNF
  std::vector<std::string> choices;  // kChoice
  bool any_whitespace = true;

  std::string cache_key() const;
};

// Builds the grammar of a spec; throws ConstraintError.
Grammar build_grammar(const ConstraintSpec& spec, const GrammarLimits& limits = {});

class GrammarCompiler {
 public:
  explicit GrammarCompiler(std::shared_ptr<const TokenVocab> vocab, size_t max_cached = 512, GrammarLimits limits = {});

  // Throws ConstraintError.
  std::shared_ptr<const CompiledGrammar> compile(const ConstraintSpec& spec);
  const TokenVocab& vocab() const { return *vocab_; }
  std::shared_ptr<const TokenVocab> vocab_ptr() const { return vocab_; }

 private:
  std::shared_ptr<const TokenVocab> vocab_;
  size_t max_cached_;
  GrammarLimits limits_;
  std::mutex mu_;
  std::list<std::string> lru_;  // most recent first
  std::unordered_map<std::string, std::pair<std::shared_ptr<const CompiledGrammar>, std::list<std::string>::iterator>>
      cache_;
};

}  // namespace gs::structured
