// Launchers of the batched LoRA ops (punica's shrink and expand): one adapter slot per
// token read from a device buffer, so one captured graph serves any mix of adapters. Kernels in
// lora_shrink.cu, lora_expand.cu and lora_fused.cu (the expand inside the op after it).
#pragma once
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "ops/gated_activation.h"

namespace gs::cuda {

using bf16_t = uint16_t;

// The fused targets of y (q|k|v, gate|up) for the expand: columns from begin1 on use the rank
// rows [rows, 2 rows), from begin2 on [2 rows, 3 rows), before begin1 [0, rows); bt is zero
// elsewhere. One target: rows = R, begin1 = begin2 = INT_MAX.
struct LoraColumnParts {
  int rows = 0;
  int begin1 = INT_MAX, begin2 = INT_MAX;
};

// Where the fused expands read a token's rank-R intermediate (f32): p + t ld + slot slot_stride.
// Either lora_shrink's tmp [T, R] (ld R, slot_stride 0), or the stacked shrink inside the
// projection's own f32 output (p at its column N, ld its width, slot_stride R: the base GEMM ran
// over the weight with every slot's A rows stacked under it; LoraSlots).
struct LoraTmp {
  const float* p = nullptr;
  int64_t ld = 0, slot_stride = 0;
};

// tmp[t, :] = x[t, :] a[s]^T with s = slots[t], for rows with 0 <= s < S (others untouched).
// x [T_, K], a [S, R, K], tmp [T_, R] f32. One kernel launched with PDL, loading its adapter
// weights before waiting for the previous kernel (they do not change while a graph runs).
template <typename T>
cudaError_t lora_shrink(const T* x, const T* a, const int32_t* slots, float* tmp, int T_, int K, int R, int S,
                        cudaStream_t s);
// y[t, :] += tmp[t, :] bt[s] for the same rows. bt [S, R, N], y [T_, N]. One kernel with PDL.
template <typename T>
cudaError_t lora_expand(const float* tmp, const T* bt, const int32_t* slots, T* y, int T_, int R, int N, int S,
                        LoraColumnParts parts, cudaStream_t s);

// The expand fused with the op that consumes its y, one kernel instead of two (each launches
// nothing and returns false where its shape is not supported: the caller then runs lora_expand
// and the plain op). y (Ty: T, or f32 from the stacked GEMM) has rows ld elements apart (its
// width, or wider: the stacked shrink's columns after them).
// x += tmp bt[s] (rounded to T, as lora_expand stores it), then residual += x and out =
// rms_norm(residual) * w, per row of H. R rank rows of one target; out may alias x. Residual Rs
// is T or f32. Needs H % 8 == 0, H <= 8192 and 16-byte aligned rows.
template <typename T, typename Ty, typename Rs>
bool lora_expand_add_rms_norm(LoraTmp tmp, const T* bt, const int32_t* slots, Rs* residual, const Ty* x, int64_t ld,
                              const T* w, float eps, T* out, int T_, int H, int R, int S, cudaStream_t s,
                              cudaError_t* err);
// qkv += tmp bt[s] over the targets q | k | v (parts in columns: heads never straddle two), then
// split_qkv_rope without q/k norm (the same angles and rotation). qkv is left as it was. Needs D a
// multiple of 16, (hq + 2 hkv) D / 16 <= 1024 and 16-byte aligned rows.
template <typename T, typename Ty>
bool lora_expand_split_qkv_rope(LoraTmp tmp, const T* bt, const int32_t* slots, LoraColumnParts parts, int R, int S,
                                const Ty* qkv, int64_t ld, const int32_t* positions, const float* inv_freq, T* q, T* k,
                                T* v, int T_, int hq, int hkv, int D, int long_from, cudaStream_t s, cudaError_t* err);
// gate_up += tmp bt[s] over the two targets gate (columns [0, I), rank rows [0, R/2)) and up
// ([I, 2I), [R/2, R)), then out = act(gate) * up. gate_up is left as it was. Needs I % 8 == 0,
// 16-byte aligned rows and fewer than 64 tokens (from there the segmented expand, then the
// plain activation: it reads each adapter once per 16-token chunk, the per-token kernel once per
// token).
template <typename T, typename Ty>
bool lora_expand_gated_activation(GatedActivation act, LoraTmp tmp, const T* bt, const int32_t* slots,
                                  const Ty* gate_up, int64_t ld, T* out, int T_, int I, int R, int S, cudaStream_t s,
                                  cudaError_t* err);

}  // namespace gs::cuda
