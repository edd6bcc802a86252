#include "structured/structured_bench.h"

#include <algorithm>
#include <chrono>

#include "structured/constraint_error.h"
#include "structured/grammar_compiler.h"
#include "structured/grammar_walk.h"

namespace gs::structured {

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))]; };
  p.count = v.size();
  p.p50 = at(0.5), p.p90 = at(0.9), p.p99 = at(0.99), p.max = v.back();
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / static_cast<double>(v.size());
  return p;
}

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

StructuredBenchResult bench_structured(std::shared_ptr<const TokenVocab> vocab,
                                       const std::vector<std::string>& schemas) {
  StructuredBenchResult r;
  const GrammarLimits limits;
  std::vector<double> compile_ms, grammar_ms, cache_ms, mask_us, lazy_us;
  for (size_t i = 0; i < schemas.size(); ++i) {
    ++r.schemas;
    ConstraintSpec spec;
    spec.kind = ConstraintSpec::Kind::kJsonSchema;
    spec.text = schemas[i];
    std::shared_ptr<const CompiledGrammar> g;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      g = std::make_shared<const CompiledGrammar>(build_grammar(spec, limits), vocab);
    } catch (const ConstraintError& e) {
      r.failures.push_back(schemas[i] + ": " + e.what());
      continue;
    }
    const double grammar = ms_since(t0);
    const auto t1 = std::chrono::steady_clock::now();
    const bool eager = g->automaton().num_positions() <= limits.max_eager_positions;
    g->warm();
    const double cache = ms_since(t1);
    grammar_ms.push_back(grammar);
    cache_ms.push_back(cache);
    compile_ms.push_back(grammar + (eager ? cache : 0.0));
    walk_grammar(g, {static_cast<uint32_t>(i), 24, 600}, [&](double s) { mask_us.push_back(s * 1e6); });
    auto lazy = std::make_shared<const CompiledGrammar>(build_grammar(spec, limits), vocab);
    walk_grammar(lazy, {static_cast<uint32_t>(i) + 7919u, 24, 600}, [&](double s) { lazy_us.push_back(s * 1e6); });
  }
  r.compile_ms = percentiles(std::move(compile_ms));
  r.grammar_ms = percentiles(std::move(grammar_ms));
  r.cache_ms = percentiles(std::move(cache_ms));
  r.mask_us = percentiles(std::move(mask_us));
  r.lazy_mask_us = percentiles(std::move(lazy_us));
  return r;
}

}  // namespace gs::structured
