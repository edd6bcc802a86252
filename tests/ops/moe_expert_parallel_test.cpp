// Expert parallelism in the CPU reference of the MoE ops (ops/moe.h): a routing with an expert
// range gives the whole routing's experts as local ids, kMoeOtherRank for the other ranks' and
// the same weights, on hand-computed and random logits with every routing rule; moe_experts skips
// the other ranks' pairs, so the ranks' outputs (each over its slice of the experts and their
// biases) sum to the whole layer's, and a token none of whose experts a rank holds gets 0 there.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/backend.h"

namespace gs {
namespace {

std::vector<float> uniform(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

template <typename T>
std::vector<T> host(const Tensor& t) {
  return std::vector<T>(t.data_as<T>(), t.data_as<T>() + t.numel());
}

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Routed route(Backend& be, const std::vector<float>& logits, const std::vector<float>& bias, const MoeRouting& r) {
  const int E = r.num_experts, k = r.top_k, T = int(logits.size()) / E;
  Tensor l = be.upload(logits.data(), DType::F32, {T, E}, DType::F32);
  Tensor b = bias.empty() ? Tensor() : be.upload(bias.data(), DType::F32, {E}, DType::F32);
  Tensor ids = Tensor::empty({T, k}, DType::I32, be.allocator()), w = Tensor::empty({T, k}, DType::F32, be.allocator());
  be.moe_route(l, b, r, ids, w);
  be.stream().synchronize();
  return {host<int32_t>(ids), host<float>(w)};
}

// A rank's experts [begin, begin + count).
struct Held {
  int begin = 0, count = 0;
};

MoeRouting with_range(MoeRouting r, const Held& held) {
  r.first_expert = held.begin;
  r.local_experts = held.count;
  return r;
}

// l = {1, 3, 2, 0}, top 2 renormalised: experts 1 and 2. A rank holding experts 2 and 3 sees
// (other, 0); one holding 0 and 1 sees (1, other); the weights are the whole routing's.
TEST(MoeExpertParallel, RouteEmitsLocalIdsAndSentinelsByHand) {
  auto be = make_cpu_backend();
  const std::vector<float> l{1, 3, 2, 0};
  const MoeRouting r{.num_experts = 4, .top_k = 2, .renormalize = true};
  const Routed whole = route(*be, l, {}, r);
  ASSERT_EQ(whole.ids, (std::vector<int32_t>{1, 2}));
  const Routed hi = route(*be, l, {}, with_range(r, {2, 2}));
  EXPECT_EQ(hi.ids, (std::vector<int32_t>{kMoeOtherRank, 0}));
  EXPECT_EQ(hi.weights, whole.weights);
  const Routed lo = route(*be, l, {}, with_range(r, {0, 2}));
  EXPECT_EQ(lo.ids, (std::vector<int32_t>{1, kMoeOtherRank}));
  EXPECT_EQ(lo.weights, whole.weights);
}

// Random logits through softmax, group-limited and sigmoid + bias routings: over 3 ranks (10
// experts: 4, 3, 3, vLLM's linear placement), each pair is local on exactly the rank holding its
// expert.
TEST(MoeExpertParallel, RouteWithAnExpertRangeIsTheWholeRoutingLocalised) {
  auto be = make_cpu_backend();
  const int E = 10, T = 24;
  const Held placement[] = {{0, 4}, {4, 3}, {7, 3}};
  const std::vector<MoeRouting> routings = {
      {.num_experts = E, .top_k = 3, .renormalize = true},
      {.num_experts = E, .top_k = 4, .n_group = 5, .topk_group = 2, .scaling = 2.5f},
      {.score = MoeScore::Sigmoid,
       .num_experts = E,
       .top_k = 3,
       .n_group = 2,
       .topk_group = 1,
       .group_key = MoeGroupKey::TopTwoSum,
       .renormalize = true}};
  const std::vector<float> logits = uniform(size_t(T) * E, 1, 3.0f), bias = uniform(E, 2, 0.2f);
  for (const MoeRouting& r : routings) {
    SCOPED_TRACE(testing::Message() << "top " << r.top_k << ", " << r.n_group << " groups");
    const std::vector<float> b = r.score == MoeScore::Sigmoid ? bias : std::vector<float>{};
    const Routed whole = route(*be, logits, b, r);
    std::vector<int> owners(whole.ids.size(), 0);
    for (const Held& held : placement) {
      const Routed mine = route(*be, logits, b, with_range(r, held));
      EXPECT_EQ(mine.weights, whole.weights);
      for (size_t p = 0; p < whole.ids.size(); ++p) {
        const int64_t l = whole.ids[p] - held.begin;
        const bool local = l >= 0 && l < held.count;
        EXPECT_EQ(mine.ids[p], local ? int32_t(l) : kMoeOtherRank) << "pair " << p << ", experts from " << held.begin;
        owners[p] += local ? 1 : 0;
      }
    }
    EXPECT_EQ(owners, std::vector<int>(whole.ids.size(), 1));
  }
}

// One layer (5 experts of width 8, top 2, expert biases) whole and as 2 ranks holding experts
// {0, 1, 2} and {3, 4}: the ranks' outputs sum to the whole one; token 0, routed to experts 0 and
// 1 alone, gets exactly 0 from rank 1.
TEST(MoeExpertParallel, CpuExpertsOfTheRanksSumToTheWholeLayer) {
  auto be = make_cpu_backend();
  const int T = 6, H = 16, I = 8, E = 5, k = 2;
  auto up = [&](const std::vector<float>& v, Shape s) { return be->upload(v.data(), DType::F32, s, DType::F32); };
  auto f32 = [&](Shape s) { return Tensor::empty(s, DType::F32, be->allocator()); };
  std::vector<float> logits = uniform(size_t(T) * E, 3, 2.0f);
  logits[0] = logits[1] = 9.0f;
  const Tensor x = up(uniform(size_t(T) * H, 4, 1.0f), {T, H}), l = up(logits, {T, E});
  const Tensor gu = up(uniform(size_t(E) * 2 * I * H, 5, 0.3f), {E * 2 * I, H});
  const Tensor down = up(uniform(size_t(E) * H * I, 6, 0.3f), {E * H, I});
  const Tensor gu_bias = up(uniform(size_t(E) * 2 * I, 7, 0.2f), {E, 2 * I});
  const Tensor down_bias = up(uniform(size_t(E) * H, 8, 0.2f), {E, H});
  const MoeRouting r{.num_experts = E, .top_k = k, .renormalize = true};
  auto run = [&](const Held& held) {
    const MoeRouting rr = held.count == E ? r : with_range(r, held);
    MoeExpertsArgs a;
    a.x = x;
    a.gate_up = gu.rows(int64_t(held.begin) * 2 * I, int64_t(held.count) * 2 * I);
    a.down = down.rows(int64_t(held.begin) * H, int64_t(held.count) * H);
    a.gate_up_bias = gu_bias.rows(held.begin, held.count);
    a.down_bias = down_bias.rows(held.begin, held.count);
    a.ids = Tensor::empty({T, k}, DType::I32, be->allocator());
    a.weights = f32({T, k});
    a.act_scratch = f32({T * k, I});
    a.pair_out = f32({T * k, H});
    a.index = Tensor::empty({moe_index_elems(T, k, held.count)}, DType::I32, be->allocator());
    a.out = f32({T, H});
    be->moe_route(l, Tensor(), rr, a.ids, a.weights);
    be->moe_experts(a);
    be->stream().synchronize();
    return host<float>(a.out);
  };
  const std::vector<float> whole = run({0, E});
  std::vector<float> sum(whole.size(), 0.0f);
  for (const Held& held : {Held{0, 3}, Held{3, 2}}) {
    const std::vector<float> part = run(held);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
    if (held.begin == 3) {
      for (int h = 0; h < H; ++h) EXPECT_EQ(part[size_t(h)], 0.0f) << "token 0, column " << h;
    }
  }
  for (size_t i = 0; i < whole.size(); ++i) EXPECT_NEAR(sum[i], whole[i], 1e-5f * std::max(1.0f, std::fabs(whole[i])));
}

}  // namespace
}  // namespace gs
