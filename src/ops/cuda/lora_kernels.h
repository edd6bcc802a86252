// Launchers of the batched LoRA kernels (punica's gathered shrink and expand): one adapter slot
// per token read from a device buffer, so one captured graph serves any mix of adapters.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace gs::cuda {

using bf16_t = uint16_t;

// tmp[t, r] = sum_k x[t, k] a[slots[t], r, k] (f32 out) for rows with 0 <= slots[t] < S.
template <typename T>
cudaError_t lora_shrink(const T* x, const T* a, const int32_t* slots, float* tmp, int T_, int K, int R, int S,
                        cudaStream_t s);
// y[t, n] += sum_r tmp[t, r] bt[slots[t], r, n] for rows with 0 <= slots[t] < S.
template <typename T>
cudaError_t lora_expand(const float* tmp, const T* bt, const int32_t* slots, T* y, int T_, int R, int N, int S,
                        cudaStream_t s);

}  // namespace gs::cuda
