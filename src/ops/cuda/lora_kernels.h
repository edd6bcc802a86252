// Launcher of the batched LoRA op (punica's gathered shrink and expand): one adapter slot per
// token read from a device buffer, so one captured graph serves any mix of adapters.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace gs::cuda {

using bf16_t = uint16_t;

// y[t, :] += (x[t, :] a[s]^T) bt[s] with s = slots[t], for rows with 0 <= s < S (others are
// untouched). x [T_, K], a [S, R, K], bt [S, R, N], tmp [T_, R] f32 scratch, y [T_, N].
// Two kernels launched with PDL, each loading its adapter weights before waiting for the
// previous kernel (the weights do not change while a graph runs).
template <typename T>
cudaError_t lora_apply(const T* x, const T* a, const T* bt, const int32_t* slots, float* tmp, T* y, int T_, int K,
                       int R, int N, int S, cudaStream_t s);

}  // namespace gs::cuda
