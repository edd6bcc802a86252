// /metrics with speculative decoding: vLLM's vllm:spec_decode_* counters, per position too;
// without speculation none of them appears.
#include <gtest/gtest.h>

#include "server/metrics.h"

namespace gs {
namespace {

TEST(SpecDecodeMetrics, VllmCountersPerPosition) {
  EngineStats e;
  e.spec.num_drafts = 10;
  e.spec.num_draft_tokens = 30;
  e.spec.num_accepted_tokens = 12;
  e.spec.num_emitted_tokens = 22;
  e.spec.accepted_per_pos = {7, 4, 1};
  const std::string m = Metrics().render(e, 0, "m");
  for (const char* want :
       {"# TYPE vllm:spec_decode_num_drafts_total counter\nvllm:spec_decode_num_drafts_total{model_name=\"m\"} 10",
        "vllm:spec_decode_num_draft_tokens_total{model_name=\"m\"} 30",
        "vllm:spec_decode_num_accepted_tokens_total{model_name=\"m\"} 12",
        "vllm:spec_decode_num_emitted_tokens_total{model_name=\"m\"} 22",
        "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",position=\"0\"} 7",
        "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",position=\"2\"} 1"})
    EXPECT_NE(m.find(want), std::string::npos) << want << "\n" << m;
  EXPECT_DOUBLE_EQ(e.spec.mean_accepted_length(), 2.2);
  EXPECT_DOUBLE_EQ(e.spec.acceptance_rate(), 0.4);
  EXPECT_EQ(Metrics().render(EngineStats{}, 0, "m").find("spec_decode"), std::string::npos);
}

}  // namespace
}  // namespace gs
