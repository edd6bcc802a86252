// Launchers of the fused mixture-of-experts kernels (Backend::moe_route, moe_experts), raw
// device pointers in, work enqueued on `s`, cudaGetLastError() out. T is bf16_t or float.
//
// moe_experts runs, with grid sizes fixed by the token count (never by the routing, so it is
// captured in graphs and replayed for any routing):
//   moe_align: the (token, slot) pairs counted and sorted by expert, each expert's first pair,
//     and the list of experts some pair selected (index: moe_index_elems layout, ops/moe.h);
//   moe_gate_up: a grouped GEMV over the listed experts: a warp computes one row of an expert's
//     gate and up projections for `tokens_per_pass` of its pairs at a time (the row is read once
//     a pass), then act(gate) * up into act [T k, I];
//   moe_down: the same over the down projection, the routing weight applied, into pair_out
//     [T k, H] (f32);
//   moe_reduce: out[t] = sum over t's k slots of pair_out, + the gated shared expert.
// Experts no token selected are never read: at one token, k experts' weights a layer.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/gated_activation.h"
#include "ops/kernel_options.h"
#include "ops/moe.h"

namespace gs::cuda {

using gs::MoeKernelOptions;

cudaError_t moe_route(const float* logits, const float* bias, const MoeRouting& r, int32_t* ids, float* weights, int T_,
                      cudaStream_t s);

// gpt-oss's additions to moe_gate_up's and moe_down's epilogues (MoeExpertsArgs): the experts'
// f32 biases [E, 2I] and [E, H] (null: none) and the clamped SwiGLU's limit.
struct MoeEpilogue {
  const float* gate_up_bias = nullptr;
  const float* down_bias = nullptr;
  float swiglu_limit = 0.0f;
};

// H and I multiples of 8, all pointers 16-byte aligned (the caller checks).
template <typename T>
cudaError_t moe_experts(GatedActivation act, const T* x, const T* gate_up, const T* down, const int32_t* ids,
                        const float* weights, const T* shared, const float* shared_gate, int shared_gate_stride,
                        T* act_scratch, float* pair_out, int32_t* index, T* out, int T_, int k, int E, int I, int H,
                        const MoeKernelOptions& opts, cudaStream_t s, const MoeEpilogue& epi = {});

}  // namespace gs::cuda
