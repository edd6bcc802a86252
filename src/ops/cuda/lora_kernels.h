// Launcher of the batched LoRA op (punica's segmented shrink and expand): one adapter slot per
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

// y[t, :] += (x[t, :] a[s]^T) bt[s] with s = slots[t], for rows with 0 <= s < S (others are
// untouched). x [T_, K], a [S, R, K], bt [S, R, N], tmp [T_, R] f32 scratch, y [T_, N].
// Two kernels launched with PDL, each loading its adapter weights before waiting for the
// previous kernel (the weights do not change while a graph runs). A block serves the tokens of
// one slot among 16 consecutive tokens, reading that adapter's weights once for all of them.
template <typename T>
cudaError_t lora_apply(const T* x, const T* a, const T* bt, const int32_t* slots, float* tmp, T* y, int T_, int K,
                       int R, int N, int S, LoraColumnParts parts, cudaStream_t s);

}  // namespace gs::cuda
