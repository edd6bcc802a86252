// The mixture-of-experts fields of config.json: which layers are sparse (Qwen's
// decoder_sparse_step and mlp_only_layers), each family's routing defaults, total vs active
// parameters, and the errors naming the field graphserve cannot honour.
#include <gtest/gtest.h>

#include <fstream>

#include "checkpoint_writer.h"
#include "core/error.h"
#include "model/model_config.h"
#include "model/presets.h"
#include "model/tp_layout.h"

namespace gs {
namespace {

using nlohmann::json;

json base(const std::string& arch) {
  return {{"architectures", {arch}},    {"vocab_size", 1000},     {"hidden_size", 256},
          {"intermediate_size", 512},   {"num_hidden_layers", 4}, {"num_attention_heads", 8},
          {"num_key_value_heads", 2},   {"num_experts", 8},       {"num_experts_per_tok", 2},
          {"moe_intermediate_size", 64}};
}

ModelConfig load(const json& config) {
  test::TempDir d;
  std::ofstream(d.path() / "config.json") << config.dump();
  return load_model_config(d.path());
}

TEST(MoeConfig, QwenSparseLayersFollowStepAndMlpOnlyLayers) {
  json c = base("Qwen3MoeForCausalLM");
  c["decoder_sparse_step"] = 2;
  c["mlp_only_layers"] = {3};
  c["norm_topk_prob"] = true;
  const ModelConfig m = load(c);
  EXPECT_EQ(m.moe.sparse_layers, (std::vector<bool>{false, true, false, false}));
  EXPECT_TRUE(m.qk_norm);
  EXPECT_TRUE(m.moe.routing.renormalize);
  EXPECT_EQ(m.moe.expert_intermediate, 64);
  EXPECT_EQ(m.moe.shared_intermediate, 0);
}

TEST(MoeConfig, MixtralRenormalisesAndQwen2MoeHasAGatedSharedExpert) {
  json mx = base("MixtralForCausalLM");
  mx.erase("num_experts");
  mx["num_local_experts"] = 8;
  const ModelConfig m = load(mx);
  EXPECT_TRUE(m.moe.routing.renormalize);
  EXPECT_EQ(m.moe.expert_intermediate, 512);  // Mixtral's experts have intermediate_size
  EXPECT_EQ(m.moe.sparse_layers, std::vector<bool>(4, true));
  json q = base("Qwen2MoeForCausalLM");
  q["shared_expert_intermediate_size"] = 128;
  const ModelConfig q2 = load(q);
  EXPECT_FALSE(q2.moe.routing.renormalize);  // norm_topk_prob defaults to false
  EXPECT_TRUE(q2.moe.shared_gate && q2.attention_bias);
  EXPECT_EQ(q2.moe.shared_intermediate, 128);
}

TEST(MoeConfig, ActiveParametersCountTopKExperts) {
  const ModelConfig c = find_preset("qwen3-30b-a3b").config;
  EXPECT_NEAR(double(c.num_parameters()) / 1e9, 30.5, 0.2);
  EXPECT_NEAR(double(c.num_active_parameters()) / 1e9, 3.3, 0.1);
  const ModelConfig m = find_preset("mixtral-8x7b").config;
  EXPECT_NEAR(double(m.num_parameters()) / 1e9, 46.7, 0.1);
  EXPECT_NEAR(double(m.num_active_parameters()) / 1e9, 12.9, 0.1);
}

TEST(MoeConfig, ErrorsNameTheField) {
  auto message = [](const json& c) {
    try {
      load(c);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  json a = base("Qwen3MoeForCausalLM");
  a.erase("moe_intermediate_size");
  EXPECT_NE(message(a).find("'moe_intermediate_size' is required"), std::string::npos) << message(a);
  json b = base("Qwen3MoeForCausalLM");
  b["num_experts_per_tok"] = 9;
  EXPECT_NE(message(b).find("'num_experts_per_tok' 9"), std::string::npos) << message(b);
  json c = base("Qwen3MoeForCausalLM");
  c["mlp_only_layers"] = {7};
  EXPECT_NE(message(c).find("'mlp_only_layers'"), std::string::npos) << message(c);
  json d = base("Qwen2MoeForCausalLM");
  EXPECT_NE(message(d).find("'shared_expert_intermediate_size' is required"), std::string::npos) << message(d);
  json e = base("Qwen3MoeForCausalLM");
  e["shared_expert_intermediate_size"] = 64;
  EXPECT_NE(message(e).find("only supported for Qwen2MoeForCausalLM"), std::string::npos) << message(e);
}

TEST(MoeConfig, TensorParallelismShardsEveryExpertsChannels) {
  const ModelConfig c = find_preset("qwen3-30b-a3b").config;
  const TpLayout t = make_tp_layout(c, 3, 4);
  EXPECT_EQ(t.local.moe.expert_intermediate, 192);
  EXPECT_EQ(t.expert_inter_begin, 576);
  EXPECT_EQ(t.local.moe.num_experts, 128);  // the router is replicated
  try {
    make_tp_layout(c, 0, 5);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must divide the experts' width 768"), std::string::npos) << e.what();
  }
}

// vLLM's linear placement: consecutive experts, E / N a rank and one more on each of the first
// E % N ranks, covering every expert once.
TEST(MoeConfig, ExpertParallelPlacementIsVllmsLinearOne) {
  const int64_t want[][2] = {{0, 3}, {3, 3}, {6, 2}, {8, 2}};  // 10 experts over 4 ranks
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(expert_range(10, r, 4).begin, want[r][0]) << "rank " << r;
    EXPECT_EQ(expert_range(10, r, 4).count, want[r][1]) << "rank " << r;
  }
  for (int E : {3, 7, 60, 128, 160})
    for (int n : {1, 2, 3, 4, 5}) {
      if (n > E) continue;
      int64_t next = 0;
      for (int r = 0; r < n; ++r) {
        const TpRange e = expert_range(E, r, n);
        EXPECT_EQ(e.begin, next) << E << " experts, rank " << r << " of " << n;
        EXPECT_TRUE(e.count == E / n || e.count == E / n + 1) << E << " experts, rank " << r << " of " << n;
        EXPECT_EQ(e.count == E / n + 1, r < E % n) << E << " experts, rank " << r << " of " << n;
        next = e.begin + e.count;
      }
      EXPECT_EQ(next, E);
    }
}

// With expert parallelism a rank holds whole experts (width 768, its range in the routing) while
// attention and the shared expert stay split on their width; the experts' width need not divide
// by the ranks, the shared expert's must, and a model with fewer experts than ranks is refused.
// At one rank, or on a dense model, the layout is the one without the flag.
TEST(MoeConfig, ExpertParallelismHoldsWholeExperts) {
  ModelConfig c = find_preset("qwen3-30b-a3b").config;
  const TpLayout t = make_tp_layout(c, 3, 4, true);
  EXPECT_TRUE(t.expert_parallel);
  EXPECT_EQ(t.experts().begin, 96);
  EXPECT_EQ(t.experts().count, 32);
  EXPECT_EQ(t.local.moe.routing.first_expert, 96);
  EXPECT_EQ(t.local.moe.routing.local_experts, 32);
  EXPECT_EQ(t.local.moe.num_experts, 128);  // the router scores every expert
  EXPECT_EQ(t.local.moe.expert_intermediate, 768);
  EXPECT_EQ(t.expert_inter_begin, 0);
  EXPECT_EQ(t.local.num_heads, c.num_heads / 4);
  const TpLayout width = make_tp_layout(c, 3, 4);
  EXPECT_FALSE(width.expert_parallel);
  EXPECT_EQ(width.experts().begin, 0);
  EXPECT_EQ(width.experts().count, 128);
  EXPECT_FALSE(make_tp_layout(c, 0, 1, true).expert_parallel);
  EXPECT_EQ(make_tp_layout(c, 0, 1, true).local.moe.routing.local_experts, 0);
  EXPECT_FALSE(make_tp_layout(find_preset("tiny-qwen3").config, 1, 2, true).expert_parallel);
  const auto refused = [](const ModelConfig& m, int size, bool ep, const std::string& what) {
    try {
      make_tp_layout(m, 0, size, ep);
      FAIL() << "no error for " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  c.moe.expert_intermediate = 770;
  refused(c, 4, false, "must divide the experts' width 770 (moe_intermediate_size); --enable-expert-parallel");
  EXPECT_EQ(make_tp_layout(c, 1, 4, true).local.moe.expert_intermediate, 770);
  c.moe.shared_intermediate = 100;
  refused(c, 8, true, "must divide the shared expert's width 100 (shared_expert_intermediate_size)");
  c.moe.shared_intermediate = 0;
  c.moe.num_experts = c.moe.routing.num_experts = 2;
  c.moe.routing.top_k = 2;
  refused(c, 4, true, "needs at least one routed expert a rank, but the model has 2");
}

}  // namespace
}  // namespace gs
