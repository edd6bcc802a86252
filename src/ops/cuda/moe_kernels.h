// Launchers of the fused mixture-of-experts kernels (Backend::moe_route, moe_experts), raw
// device pointers in, work enqueued on `s`, cudaGetLastError() out. T is bf16_t or float.
//
// moe_experts runs, with grid sizes fixed by the token count (never by the routing, so it is
// captured in graphs and replayed for any routing):
//   moe_align: the (token, slot) pairs counted and sorted by expert, and each expert's pairs cut
//     into work items of at most `chunk` pairs (index: moe_index.cuh's layout);
//   gate_up: a grouped GEMM, a CTA an item and a tile of the expert's rows, act(gate) * up into
//     act [T k, I]; bf16 on tensor cores (moe_grouped_gemm.cu, chunk from moe_mma_chunk), f32 as
//     grouped GEMVs (`tokens_per_pass` pairs a read of a weight row);
//   down: the same over the down projection, the routing weight applied, into pair_out
//     [T k, H] (f32);
//   moe_reduce: out[t] = sum over t's k slots of pair_out, + the gated shared expert.
// bf16 batches of a few tokens (MoeKernelOptions::direct_max_tokens) launch two kernels instead
// of four: gate_up and down over items of one pair each, read straight from the routing, the
// down GEMM's last CTA of each column tile doing moe_reduce's sum (MoeDirect).
// Experts no token selected are never read: at one token, k experts' weights a layer.
// Under expert parallelism a pair whose id is < 0 (kMoeOtherRank) names another rank's expert:
// moe_align neither counts nor sorts it, the small-batch path's CTA of that pair computes nothing
// but still counts itself for the fold, and every sum (moe_reduce, the fold, the dense form's
// act and reduce) leaves it out; ids are never clamped into a valid expert.
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

// An expert weight [E rows, K] as the grouped GEMMs read it: rows of T (the compute dtype), or
// e4m3 rows with f32 scales [E rows, groups] (ops/fp8_weights.h: groups 1, a scale a row, or
// K / 128, row n's columns [128 g, 128 g + 128) scaled by scales[n groups + g]). e4m3 needs bf16
// compute and K a multiple of 128.
struct MoeWeight {
  const void* data = nullptr;
  const float* scales = nullptr;  // null: rows of T
  int groups = 1;
};

// The residual add after a block of bf16 experts at one token, with the norm handoff to the next
// projection (GemvInput::handoff): residual += out (rounded to bf16, as out holds it), then
// xn = residual * norm_w rounded to bf16, in place of out. Unset (residual null): out.
struct MoeNormHandoff {
  float* residual = nullptr;         // [1, H] f32
  const uint16_t* norm_w = nullptr;  // [H]: the next norm's weight
  uint16_t* xn = nullptr;            // [1, H]
};

// Whether moe_experts takes the small-batch path (MoeKernelOptions::direct_max_tokens) for T_
// tokens of k experts out of `routed`, hidden size H: the one that takes a MoeNormHandoff (at
// T_ = 1).
bool moe_direct_path(const MoeKernelOptions& opts, int T_, int k, int routed, int H);

// H and I multiples of 8 (of 128 for e4m3 experts), all pointers 16-byte aligned (the caller
// checks). `routed` (>= E): the experts the routing picks from, all ranks' under expert
// parallelism, which the choice of path and item size go by (E / routed of the pairs are local
// on average).
template <typename T>
cudaError_t moe_experts(GatedActivation act, const T* x, const MoeWeight& gate_up, const MoeWeight& down,
                        const int32_t* ids, const float* weights, const T* shared, const float* shared_gate,
                        int shared_gate_stride, T* act_scratch, float* pair_out, int32_t* index, T* out, int T_, int k,
                        int E, int routed, int I, int H, const MoeKernelOptions& opts, cudaStream_t s,
                        const MoeEpilogue& epi = {}, const MoeNormHandoff& handoff = {});

// The small-batch path of the bf16 grouped GEMMs (MoeKernelOptions::direct_max_tokens): work
// item y is pair y, its expert ids[y] (no index needed; none where ids[y] < 0); gate_up zeroes
// `counters` and down counts its finished CTAs there, the last of each column tile writing
// out[t] = sum over t's pairs (ids >= 0) of pair_out, in slot order, + sigmoid(shared_gate[t])
// shared[t] (moe_reduce's sum).
struct MoeDirect {
  const int32_t* ids = nullptr;        // [P]
  int* counters = nullptr;             // [kMoeFoldCounters]
  const uint16_t* shared = nullptr;    // [T, H] or null
  const float* shared_gate = nullptr;  // [T, gate_stride] or null
  int gate_stride = 0;
  uint16_t* out = nullptr;  // [T, H]
  int k = 1;
  bool other_ranks = false;  // expert parallelism: some ids may be < 0, and the fold reads them
  MoeNormHandoff handoff;    // where set, the fold adds into its residual and writes its xn, not out
};

// The dense form's two kernels (MoeKernelOptions::dense_max_tokens; the GEMMs around them are
// cuBLASLt's, cuda_moe_ops.cpp). gu [T, E 2I] holds every expert's gate and up outputs of every
// token (expert e's in columns [2eI, 2eI + I) and [2eI + I, 2(e + 1)I)).
// moe_dense_act: for each selected pair (t, j), e = ids[t k + j] >= 0, the activation (with gpt-oss's
//   gate_up bias) written over e's gate columns of row t; the other columns stay as they were.
//   A token's k experts are distinct (moe_route's guarantee), so no column is written twice.
// moe_dense_reduce: out[t] = sum over j with e >= 0 of weights[t k + j] (down_out[e][t] + down_bias[e]),
//   down_out [E, T, H] f32, in slot order, + sigmoid(shared_gate[t]) shared[t] (moe_reduce's sum).
cudaError_t moe_dense_act(GatedActivation act, uint16_t* gu, const int32_t* ids, int T_, int k, int E, int I,
                          const MoeEpilogue& epi, cudaStream_t s);
cudaError_t moe_dense_reduce(const float* down_out, const int32_t* ids, const float* weights, const float* down_bias,
                             const uint16_t* shared, const float* shared_gate, int shared_gate_stride, int T_, int k,
                             int E, int H, uint16_t* out, cudaStream_t s);

// The bf16 grouped GEMMs on tensor cores (bf16 or e4m3 experts), over the items of an index
// moe_align cut into `chunk` pairs (8, 16, 32, 64 or 128; e4m3 experts 8 to 32, or 128 with a
// scale a row; items of 128 on the tiled GEMM, moe_tiled_gemm.cuh). K (H for gate_up, I for down)
// a multiple of 8 (of 128 for e4m3).
constexpr int kMoeMaxChunk = 128;
// The item size for P pairs over E experts: twice the mean pairs of an active expert, so that
// most experts' weights are read once a step (e4m3 experts: 32 or 128, and at most 32 with a
// scale a 128-k block).
int moe_mma_chunk(int P, int E, bool fp8, bool block_scales);
cudaError_t moe_gate_up_mma(GatedActivation act, const uint16_t* x, const MoeWeight& gate_up, const int32_t* index,
                            uint16_t* act_out, int P, int k, int E, int I, int H, int chunk, const MoeEpilogue& epi,
                            cudaStream_t s, const MoeDirect* direct = nullptr);
cudaError_t moe_down_mma(const uint16_t* act, const MoeWeight& down, const float* weights, const int32_t* index,
                         float* pair_out, int P, int E, int I, int H, int chunk, const MoeEpilogue& epi, cudaStream_t s,
                         const MoeDirect* direct = nullptr);

}  // namespace gs::cuda
