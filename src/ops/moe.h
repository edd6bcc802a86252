// Mixture-of-experts ops' shared definitions: the routing rule (Backend::moe_route), the
// workspace Backend::moe_experts takes, and the routing of one token as the reference function
// (the CPU backend's; the CUDA kernel computes the same picks with warp reductions, tested
// against it, ties and NaNs included).
//
// Routing of a token with router logits l[E] (HF's Mixtral, Qwen2/Qwen3-MoE, DeepSeek-V2/V3):
//   scores s = softmax(l) or sigmoid(l); selection keys c = s + bias (DeepSeek-V3's
//   e_score_correction_bias; no bias: c = s);
//   group limit (n_group > 1): the experts form n_group equal groups, a group's key is the max
//   of its c (DeepSeek-V2) or the sum of its two largest c (V3); only the topk_group best groups
//   stay selectable;
//   the top_k largest c are the experts; their weights are s (not c), divided by their sum when
//   renormalize, then multiplied by scaling (routed_scaling_factor).
// Expert parallelism (MoeRouting::local_experts > 0): the routing above runs over all E experts
// on every rank, then each id becomes the rank's local index of that expert, or kMoeOtherRank
// where another rank holds it; the weights stay those of the whole routing, so the ranks' partial
// outputs sum to the whole layer's.
#pragma once
#include <cmath>
#include <cstdint>

#include "ops/gated_activation.h"  // GS_HOST_DEVICE

namespace gs {

enum class MoeScore { Softmax, Sigmoid };
enum class MoeGroupKey { Max, TopTwoSum };

struct MoeRouting {
  MoeScore score = MoeScore::Softmax;
  int num_experts = 0;
  int top_k = 0;
  int n_group = 1;     // > 1: group-limited selection
  int topk_group = 1;  // groups kept
  MoeGroupKey group_key = MoeGroupKey::Max;
  bool renormalize = false;
  float scaling = 1.0f;
  // Expert parallelism: this rank holds experts [first_expert, first_expert + local_experts) of
  // num_experts, and moe_route emits their local ids; local_experts 0: every expert, global ids.
  int first_expert = 0;
  int local_experts = 0;

  GS_HOST_DEVICE bool expert_parallel() const { return local_experts > 0; }
  // The experts moe_experts' weights hold: local_experts, or all.
  GS_HOST_DEVICE int held_experts() const { return expert_parallel() ? local_experts : num_experts; }
};

// The id moe_route emits for a pair whose expert another rank holds (expert parallelism): every
// consumer of the routing skips the pair (ids < 0), reading no expert's weights for it.
constexpr int32_t kMoeOtherRank = -1;

// Global expert e as the id moe_route emits under `r`: itself, its local index, or kMoeOtherRank.
GS_HOST_DEVICE inline int32_t moe_local_expert(const MoeRouting& r, int e) {
  if (!r.expert_parallel()) return e;
  const int l = e - r.first_expert;
  return l >= 0 && l < r.local_experts ? l : kMoeOtherRank;
}

// The most experts a routing handles (the kernels keep a token's scores in registers / local
// memory), and the most per token.
constexpr int kMaxMoeExperts = 512;
constexpr int kMaxMoeTopK = 32;

// Counters of the small-batch path's fused reduce (one a column tile of the down projection:
// hidden sizes up to 16 of them each).
constexpr int64_t kMoeFoldCounters = 1024;

// I32 elements of moe_experts' index workspace for T tokens: the (token, slot) pairs sorted by
// expert (T k), each expert's first pair (E + 1) and its first work item (E + 1), then the
// small-batch path's kMoeFoldCounters.
inline int64_t moe_index_elems(int64_t T, int64_t top_k, int64_t E) { return T * top_k + 2 * E + 2 + kMoeFoldCounters; }

// Routes one token: logits[E] (f32), bias[E] or null -> ids[top_k], weights[top_k]. `c` is
// scratch of E floats. Ties and NaNs still give top_k distinct experts (ids in [0, E), or local
// ids and kMoeOtherRank under expert parallelism).
template <typename LoadBias>
GS_HOST_DEVICE inline void moe_route_token(const MoeRouting& r, const float* logits, LoadBias bias, float* s, float* c,
                                           int32_t* ids, float* weights) {
  const int E = r.num_experts;
  if (r.score == MoeScore::Softmax) {
    float m = logits[0];
    for (int e = 1; e < E; ++e) m = logits[e] > m ? logits[e] : m;
    float sum = 0.0f;
    for (int e = 0; e < E; ++e) sum += (s[e] = expf(logits[e] - m));
    for (int e = 0; e < E; ++e) s[e] /= sum;
  } else {
    for (int e = 0; e < E; ++e) s[e] = 1.0f / (1.0f + expf(-logits[e]));
  }
  for (int e = 0; e < E; ++e) c[e] = s[e] + bias(e);
  if (r.n_group > 1) {  // mask every expert outside the topk_group best groups
    const int G = r.n_group, per = E / G;
    uint64_t kept = 0;  // bit g: group g kept (n_group <= 64)
    for (int pick = 0; pick < r.topk_group; ++pick) {
      int best = -1;
      float best_key = 0.0f;
      for (int g = 0; g < G; ++g) {
        if (kept >> g & 1) continue;
        float a = -INFINITY, b = -INFINITY;  // the group's largest two keys
        for (int e = g * per; e < (g + 1) * per; ++e) {
          if (c[e] > a) {
            b = a;
            a = c[e];
          } else if (c[e] > b) {
            b = c[e];
          }
        }
        const float key = r.group_key == MoeGroupKey::Max ? a : a + b;
        if (best < 0 || key > best_key) best = g, best_key = key;
      }
      kept |= uint64_t(1) << best;
    }
    for (int e = 0; e < E; ++e)
      if (!(kept >> (e / per) & 1)) c[e] = -INFINITY;
  }
  float total = 0.0f;
  for (int j = 0; j < r.top_k; ++j) {
    int best = -1;
    for (int e = 0; e < E; ++e) {
      bool taken = false;
      for (int i = 0; i < j; ++i) taken = taken || ids[i] == e;
      if (taken) continue;
      if (best < 0 || c[e] > c[best]) best = e;
    }
    ids[j] = best;
    weights[j] = s[best];
    total += s[best];
  }
  const float f = r.renormalize ? r.scaling / total : r.scaling;
  for (int j = 0; j < r.top_k; ++j) weights[j] *= f;
  for (int j = 0; j < r.top_k; ++j) ids[j] = moe_local_expert(r, ids[j]);  // after the picks: they compare global ids
}

}  // namespace gs
