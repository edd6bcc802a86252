// CPU reference of the batched LoRA op (Backend::lora_apply), fp32.
#pragma once
#include <cstdint>

namespace gs::cpu {

// y[t, :] += (x[t, :] a[s]^T) bt[s] with s = slots[t], for rows with 0 <= s < S.
// x [T, K], a [S, R, K], bt [S, R, N], tmp [T, R] (scratch), y [T, N].
void lora_apply(const float* x, const float* a, const float* bt, const int32_t* slots, float* tmp, float* y, int64_t T,
                int64_t K, int64_t R, int64_t N, int64_t S);

}  // namespace gs::cpu
