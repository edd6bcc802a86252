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

StructuredBenchResult bench_structured(std::shared_ptr<const TokenVocab> vocab,
                                       const std::vector<std::string>& schemas) {
  StructuredBenchResult r;
  std::vector<double> compile_ms, warm_ms, cold_us, warm_us;
  for (size_t i = 0; i < schemas.size(); ++i) {
    ++r.schemas;
    ConstraintSpec spec;
    spec.kind = ConstraintSpec::Kind::kJsonSchema;
    spec.text = schemas[i];
    std::shared_ptr<const CompiledGrammar> g;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      g = std::make_shared<const CompiledGrammar>(build_grammar(spec), vocab);
    } catch (const ConstraintError& e) {
      r.failures.push_back(schemas[i] + ": " + e.what());
      continue;
    }
    compile_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    walk_grammar(g, {static_cast<uint32_t>(i), 24, 600}, [&](double s) { cold_us.push_back(s * 1e6); });
    auto warmed = std::make_shared<const CompiledGrammar>(build_grammar(spec), vocab);
    const auto t1 = std::chrono::steady_clock::now();
    warmed->warm();
    warm_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count());
    walk_grammar(warmed, {static_cast<uint32_t>(i) + 7919u, 24, 600}, [&](double s) { warm_us.push_back(s * 1e6); });
  }
  r.compile_ms = percentiles(std::move(compile_ms));
  r.warm_all_ms = percentiles(std::move(warm_ms));
  r.cold_mask_us = percentiles(std::move(cold_us));
  r.warm_mask_us = percentiles(std::move(warm_us));
  return r;
}

}  // namespace gs::structured
