// CPU reference of the batched LoRA ops (Backend::lora_shrink, lora_expand), fp32.
#pragma once
#include <cstdint>

namespace gs::cpu {

// tmp[t, :] = x[t, :] a[s]^T with s = slots[t], for rows with 0 <= s < S.
// x [T, K], a [S, R, K], tmp [T, R].
void lora_shrink(const float* x, const float* a, const int32_t* slots, float* tmp, int64_t T, int64_t K, int64_t R,
                 int64_t S);
// y[t, :] += tmp[t, :] bt[s] with s = slots[t], for rows with 0 <= s < S. bt [S, R, N], y [T, N].
void lora_expand(const float* tmp, const float* bt, const int32_t* slots, float* y, int64_t T, int64_t R, int64_t N,
                 int64_t S);

}  // namespace gs::cpu
