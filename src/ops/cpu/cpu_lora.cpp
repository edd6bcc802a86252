// CPU reference of the batched LoRA ops: per token, the gathered low-rank shrink (x A^T) into its
// rank-R row of tmp, and the expand of that row into y (punica's two products).
#include "ops/cpu/cpu_lora.h"

namespace gs::cpu {

namespace {

// f(t, s) for each token t whose slot s is an adapter's (0 <= s < S).
template <typename F>
void for_adapter_tokens(const int32_t* slots, int64_t T, int64_t S, F&& f) {
  for (int64_t t = 0; t < T; ++t)
    if (slots[t] >= 0 && slots[t] < S) f(t, int64_t(slots[t]));
}

}  // namespace

void lora_shrink(const float* x, const float* a, const int32_t* slots, float* tmp, int64_t T, int64_t K, int64_t R,
                 int64_t S) {
  for_adapter_tokens(slots, T, S, [&](int64_t t, int64_t s) {
    const float* xr = x + t * K;
    for (int64_t r = 0; r < R; ++r) {
      const float* ar = a + (s * R + r) * K;
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) acc += xr[k] * ar[k];
      tmp[t * R + r] = acc;
    }
  });
}

void lora_expand(const float* tmp, const float* bt, const int32_t* slots, float* y, int64_t T, int64_t R, int64_t N,
                 int64_t S) {
  for_adapter_tokens(slots, T, S, [&](int64_t t, int64_t s) {
    const float* tr = tmp + t * R;
    float* yr = y + t * N;
    for (int64_t r = 0; r < R; ++r) {
      if (tr[r] == 0.0f) continue;
      const float* br = bt + (s * R + r) * N;
      for (int64_t n = 0; n < N; ++n) yr[n] += tr[r] * br[n];
    }
  });
}

}  // namespace gs::cpu
