// The structured-output benchmark (`graphserve bench structured`): schema compile time and the
// time of each token mask, over a vocabulary, on this host's CPU.
//
// Per schema: compile (grammar and automaton) is timed; a walk (random allowed tokens, then
// closing ones) times every mask with the cache cold (entries built as the walk reaches them:
// the first request of a schema); then a fresh copy's warm() (every entry) is timed and a walk
// over it times the masks warm.
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
  Percentiles compile_ms;             // per schema: grammar and automaton (cache entries built on use)
  Percentiles warm_all_ms;            // per schema: building every position's cache entry
  Percentiles cold_mask_us;           // per token, first walk of each schema (entries built as reached)
  Percentiles warm_mask_us;           // per token, a walk with every entry built
};

StructuredBenchResult bench_structured(std::shared_ptr<const TokenVocab> vocab,
                                       const std::vector<std::string>& schemas);

}  // namespace gs::structured
