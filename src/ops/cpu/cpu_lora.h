// CPU reference of the batched LoRA ops (Backend::lora_shrink / lora_expand), fp32.
#pragma once
#include <cstdint>

namespace gs::cpu {

// tmp[t, r] = sum_k x[t, k] a[slots[t], r, k] for rows with 0 <= slots[t] < S.
void lora_shrink(const float* x, const float* a, const int32_t* slots, float* tmp, int64_t T, int64_t K, int64_t R,
                 int64_t S);
// y[t, n] += sum_r tmp[t, r] bt[slots[t], r, n] for rows with 0 <= slots[t] < S.
void lora_expand(const float* tmp, const float* bt, const int32_t* slots, float* y, int64_t T, int64_t R, int64_t N,
                 int64_t S);

}  // namespace gs::cpu
