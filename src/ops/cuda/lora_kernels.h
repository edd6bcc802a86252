// Launchers of the batched LoRA ops (punica's shrink and expand): one adapter slot per
// token read from a device buffer, so one captured graph serves any mix of adapters.
#pragma once
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

namespace gs::cuda {

using bf16_t = uint16_t;

// The fused targets of y (q|k|v, gate|up) for the expand: columns from begin1 on use the rank
// rows [rows, 2 rows), from begin2 on [2 rows, 3 rows), before begin1 [0, rows); bt is zero
// elsewhere. One target: rows = R, begin1 = begin2 = INT_MAX.
struct LoraColumnParts {
  int rows = 0;
  int begin1 = INT_MAX, begin2 = INT_MAX;
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

}  // namespace gs::cuda
