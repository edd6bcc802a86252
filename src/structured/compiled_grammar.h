// CompiledGrammar: a grammar's automaton bound to a vocabulary, with the adaptive token-mask
// cache (xgrammar's design).
//
// For each scanning position the cache splits the vocabulary, once, into tokens accepted and
// rejected whatever the stack below holds (context-independent) and the few whose fate depends
// on it (they end the position's rule with bytes left and the grammar does not fix where the
// rule returns). At run time a mask is the cached accepted set plus a check of the uncertain
// tokens against the real stack (GrammarMatcher walks them in byte order, sharing prefixes).
// Entries are built by MaskBuilder (a trie walk over a DFA shared by the grammar's positions) on
// first use and shared by every request of the grammar (thread-safe); warm() builds them all.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "structured/automaton.h"
#include "structured/token_vocab.h"

namespace gs::structured {

class MaskBuilder;

struct MaskEntry {
  std::vector<uint32_t> accepted;       // mask words
  std::vector<int32_t> uncertain;       // token ids, in vocabulary byte order
  std::vector<uint16_t> uncertain_lcp;  // each uncertain token's common prefix with the one before
};

class CompiledGrammar {
 public:
  CompiledGrammar(const Grammar& g, std::shared_ptr<const TokenVocab> vocab);
  ~CompiledGrammar();

  const Automaton& automaton() const { return automaton_; }
  const TokenVocab& vocab() const { return *vocab_; }
  // The cache entry of scanning position `pos`, built on first use.
  const MaskEntry& entry(uint32_t pos) const;
  // Builds the entries of every scanning position.
  void warm() const;
  size_t num_rules() const { return num_rules_; }

 private:
  MaskEntry build(uint32_t pos) const;

  Automaton automaton_;
  std::shared_ptr<const TokenVocab> vocab_;
  size_t num_rules_ = 0;
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<const MaskEntry>> entries_;
  mutable std::mutex build_mu_;                   // guards builder_ (entries are built one at a time)
  mutable std::unique_ptr<MaskBuilder> builder_;  // the DFA shared by the grammar's entries
};

}  // namespace gs::structured
