// /metrics for shared prefixes: vLLM's prefix cache counters come from the scheduler's own query
// and hit counts (not the computed prompt tokens), and cascade attention steps are counted.
#include <gtest/gtest.h>

#include "server/metrics.h"

namespace gs {
namespace {

TEST(PrefixMetrics, QueriesHitsAndCascadeSteps) {
  EngineStats e;
  e.prompt_tokens = 51;  // computed: three 49-token prompts, two of them found 48 tokens cached
  e.prefix_cache_query_tokens = 147;
  e.prefix_cache_hit_tokens = 96;
  e.graphs.steps_cascade = 7;
  const std::string m = Metrics().render(e, 0, "m");
  for (const char* want :
       {"vllm:prefix_cache_queries_total{model_name=\"m\"} 147", "vllm:prefix_cache_hits_total{model_name=\"m\"} 96",
        "# TYPE graphserve_cascade_attention_steps_total counter\n"
        "graphserve_cascade_attention_steps_total 7"})
    EXPECT_NE(m.find(want), std::string::npos) << want << "\n" << m;
}

}  // namespace
}  // namespace gs
