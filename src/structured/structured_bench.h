// The structured-output benchmark (`graphserve bench structured`): schema compile time and the
// time of each token mask, over a vocabulary, on this host's CPU.
//
// Per schema: compile is timed as GrammarCompiler::compile does it on the HTTP thread (grammar,
// automaton, and the whole token-mask cache for grammars within the eager cap), with its two
// parts also reported apart; a walk (random allowed tokens, then closing ones) over the
// compiled grammar times every mask a request sees. A second walk over a fresh copy whose
// entries are built as the walk reaches them times the masks of a grammar past the eager cap.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "structured/token_vocab.h"

namespace gs::structured {

struct Percentiles {
  size_t count = 0;
  double p50 = 0, p90 = 0, p99 = 0, mean = 0, max = 0;
};
Percentiles percentiles(std::vector<double> v);

struct StructuredBenchResult {
  int schemas = 0;
  std::vector<std::string> failures;  // schemas that did not compile (with the reason)
  Percentiles compile_ms;             // per schema: what a request waits for (grammar + eager mask cache)
  Percentiles grammar_ms;             // per schema: grammar and automaton alone
  Percentiles cache_ms;               // per schema: building every position's cache entry
  Percentiles mask_us;                // per token, a walk over the compiled grammar
  Percentiles lazy_mask_us;           // per token, entries built as the walk reaches them
};

StructuredBenchResult bench_structured(std::shared_ptr<const TokenVocab> vocab,
                                       const std::vector<std::string>& schemas);

}  // namespace gs::structured
