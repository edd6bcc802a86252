// The routing rule of ops/moe.h on the CPU backend, on hand-computed cases: Mixtral's softmax
// top-k renormalised, Qwen2-MoE's unnormalised weights, DeepSeek-V2's group-limited greedy
// selection with routed_scaling_factor, and DeepSeek-V3's sigmoid scores with the correction
// bias steering the selection (not the weights) and groups ranked by their two best keys.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/backend.h"

namespace gs {
namespace {

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Routed route(const std::vector<float>& logits, const std::vector<float>& bias, const MoeRouting& r) {
  auto be = make_cpu_backend();
  const int E = r.num_experts, k = r.top_k;
  Tensor l = be->upload(logits.data(), DType::F32, {1, E}, DType::F32);
  Tensor b = bias.empty() ? Tensor() : be->upload(bias.data(), DType::F32, {E}, DType::F32);
  Tensor ids = Tensor::empty({1, k}, DType::I32, be->allocator()),
         w = Tensor::empty({1, k}, DType::F32, be->allocator());
  be->moe_route(l, b, r, ids, w);
  be->stream().synchronize();
  return {std::vector<int32_t>(ids.data_as<int32_t>(), ids.data_as<int32_t>() + k),
          std::vector<float>(w.data_as<float>(), w.data_as<float>() + k)};
}

TEST(MoeRoute, SoftmaxTopKRenormalisedOrNot) {
  const std::vector<float> l{1, 3, 2, 0};
  const float z = std::exp(1.f) + std::exp(3.f) + std::exp(2.f) + 1.f;
  Routed a = route(l, {}, {.num_experts = 4, .top_k = 2, .renormalize = true});
  EXPECT_EQ(a.ids, (std::vector<int32_t>{1, 2}));
  EXPECT_NEAR(a.weights[0], std::exp(3.f) / (std::exp(3.f) + std::exp(2.f)), 1e-6);
  EXPECT_NEAR(a.weights[1], std::exp(2.f) / (std::exp(3.f) + std::exp(2.f)), 1e-6);
  Routed b = route(l, {}, {.num_experts = 4, .top_k = 2});
  EXPECT_NEAR(b.weights[0], std::exp(3.f) / z, 1e-6);
  EXPECT_NEAR(b.weights[1], std::exp(2.f) / z, 1e-6);
}

TEST(MoeRoute, GroupLimitedGreedyKeepsTheBestGroups) {
  // Groups {0,1} {2,3} {4,5}: best members 5, 3.1, 3. Top group only: experts 0 and 1, although 3 beats 1.
  const std::vector<float> l{5, 1, 3.1f, 0, 3, 0};
  Routed r = route(l, {}, {.num_experts = 6, .top_k = 2, .n_group = 3, .topk_group = 1, .scaling = 2.0f});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0, 1}));
  float z = 0;
  for (float v : l) z += std::exp(v);
  EXPECT_NEAR(r.weights[1], 2.0f * std::exp(1.f) / z, 1e-6);
}

TEST(MoeRoute, SigmoidBiasSteersSelectionNotWeights) {
  // Groups {0,1} {2,3}: keys s + bias; group {2,3} ranks higher by its two best (TopTwoSum),
  // though expert 0 alone has the largest key.
  const std::vector<float> l{2, -3, 1, 1}, bias{0.5f, 0, 0.2f, 0.2f};
  auto sig = [](float x) { return 1 / (1 + std::exp(-x)); };
  Routed r = route(l, bias,
                   {.score = MoeScore::Sigmoid,
                    .num_experts = 4,
                    .top_k = 2,
                    .n_group = 2,
                    .topk_group = 1,
                    .group_key = MoeGroupKey::TopTwoSum,
                    .renormalize = true,
                    .scaling = 3.0f});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2, 3}));
  EXPECT_NEAR(r.weights[0], 3.0f * sig(1) / (2 * sig(1)), 1e-6);  // weights from s, not s + bias
  Routed m = route(l, bias, {.score = MoeScore::Sigmoid, .num_experts = 4, .top_k = 1});
  EXPECT_EQ(m.ids, (std::vector<int32_t>{0}));
  EXPECT_NEAR(m.weights[0], sig(2), 1e-6);
}

}  // namespace
}  // namespace gs
