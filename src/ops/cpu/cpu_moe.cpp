// Implements ops/cpu/cpu_moe.h: the routing of ops/moe.h per token, then every (token, slot)
// pair's expert MLP in f32, summed per token in slot order; pairs of another rank's expert (ids
// < 0, expert parallelism) are skipped.
#include "ops/cpu/cpu_moe.h"

#include <vector>

#include "core/error.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/moe_checks.h"

namespace gs::cpu {

void enqueue_moe_route(CpuStream& s, const Tensor& logits, const Tensor& bias, const MoeRouting& r, const Tensor& ids,
                       const Tensor& weights) {
  const MoeDims d = check_moe_route(logits, bias, r, ids, weights);
  const float* l = logits.data_as<const float>();
  const float* b = bias.defined() ? bias.data_as<const float>() : nullptr;
  auto* id = ids.data_as<int32_t>();
  auto* w = weights.data_as<float>();
  s.launch([=] {
    std::vector<float> sc(size_t(d.E)), c(size_t(d.E));
    for (int64_t t = 0; t < d.T; ++t)
      moe_route_token(
          r, l + t * d.E, [b](int e) { return b ? b[e] : 0.0f; }, sc.data(), c.data(), id + t * d.k, w + t * d.k);
  });
}

void enqueue_moe_experts(CpuStream& s, const MoeExpertsArgs& a) {
  const MoeDims d = check_moe_experts(a, DType::F32);
  GS_CHECK(a.gate_up.dtype() == DType::F32, "moe_experts: the CPU reference takes f32 experts, got {}",
           a.gate_up.str());
  const float *x = a.x.data_as<const float>(), *gu = a.gate_up.data_as<const float>();
  const float *dn = a.down.data_as<const float>(), *w = a.weights.data_as<const float>();
  const int32_t* ids = a.ids.data_as<const int32_t>();
  const float* sh = a.shared.defined() ? a.shared.data_as<const float>() : nullptr;
  const float* sg = a.shared_gate.defined() ? a.shared_gate.data_as<const float>() : nullptr;
  const int64_t sg_stride = a.shared_gate.defined() ? a.shared_gate.row_elems() : 0;
  float *act = a.act_scratch.data_as<float>(), *po = a.pair_out.data_as<float>(), *out = a.out.data_as<float>();
  const float* gub = a.gate_up_bias.defined() ? a.gate_up_bias.data_as<const float>() : nullptr;
  const float* db = a.down_bias.defined() ? a.down_bias.data_as<const float>() : nullptr;
  const GatedActivation fn = a.act;
  const float limit = a.swiglu_limit;
  s.launch([=] {
    const int64_t T = d.T, k = d.k, E = d.E, I = d.I, H = d.H;
    std::vector<float> g(size_t(2 * I));
    for (int64_t p = 0; p < T * k; ++p) {
      const int64_t t = p / k, e = ids[p];
      if (e < 0) continue;
      GS_CHECK(e < E, "moe_experts: token {} selected expert {} of {}", t, e, E);
      linear(x + t * H, gu + e * 2 * I * H, gub ? gub + e * 2 * I : nullptr, g.data(), 1, 2 * I, H);
      if (fn == GatedActivation::ClampedSwiglu) {
        for (int64_t i = 0; i < I; ++i) act[p * I + i] = clamped_swiglu(g[size_t(i)], g[size_t(I + i)], limit);
      } else {
        gated_activation(fn, g.data(), act + p * I, 1, I);
      }
      linear(act + p * I, dn + e * H * I, db ? db + e * H : nullptr, po + p * H, 1, H, I);
    }
    for (int64_t t = 0; t < T; ++t) {
      const float f = sh ? (sg ? 1.0f / (1.0f + std::exp(-sg[t * sg_stride])) : 1.0f) : 0.0f;
      for (int64_t h = 0; h < H; ++h) {
        float acc = 0.0f;
        for (int64_t j = 0; j < k; ++j)
          if (ids[t * k + j] >= 0) acc += w[t * k + j] * po[(t * k + j) * H + h];
        out[t * H + h] = sh ? acc + f * sh[t * H + h] : acc;
      }
    }
  });
}

}  // namespace gs::cpu
