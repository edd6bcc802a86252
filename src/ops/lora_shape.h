// Shape checks of the batched LoRA op (Backend::lora_apply), shared by the CPU and CUDA backends.
#pragma once
#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"
#include "ops/backend.h"

namespace gs {

struct LoraShape {
  int64_t T, K, N, S, R;  // tokens, columns of x, columns of y, slots, rank rows
};

// x [T, K], a [S, R, K], bt [S, R, N], slots [>= T], tmp [T, R], y [T, N].
inline LoraShape check_lora_shape(const Tensor& x, const Tensor& a, const Tensor& bt, const Tensor& slots,
                                  const Tensor& tmp, const Tensor& y) {
  const int64_t T = x.dim(0), K = x.row_elems(), N = y.row_elems();
  GS_CHECK(y.dim(0) == T, "lora_apply: y {} and x {} disagree on tokens", y.str(), x.str());
  GS_CHECK(a.ndim() == 3 && a.dim(2) == K, "lora_apply: a {} must be [S, R, {}]", a.str(), K);
  GS_CHECK(bt.ndim() == 3 && bt.dim(0) == a.dim(0) && bt.dim(1) == a.dim(1) && bt.dim(2) == N,
           "lora_apply: bt {} must be [{}, {}, {}]", bt.str(), a.dim(0), a.dim(1), N);
  GS_CHECK(tmp.ndim() == 2 && tmp.dim(0) == T && tmp.dim(1) == a.dim(1), "lora_apply: tmp {} must be [{}, {}]",
           tmp.str(), T, a.dim(1));
  GS_CHECK(slots.numel() >= T, "lora_apply: slots {} has fewer than {} rows", slots.str(), T);
  return {T, K, N, a.dim(0), a.dim(1)};
}

// parts: 1 to 3 targets, each with its share of the rank rows and a non-empty column range of y.
inline void check_lora_parts(const LoraParts& p, const LoraShape& l) {
  GS_CHECK(p.n >= 1 && p.n <= 3 && l.R % p.n == 0, "lora_apply: {} fused targets over {} rank rows (1 to 3, dividing)",
           p.n, l.R);
  GS_CHECK(p.begin[0] == 0, "lora_apply: the first fused target starts at column {}, not 0", p.begin[0]);
  for (int c = 1; c < p.n; ++c)
    GS_CHECK(p.begin[size_t(c)] > p.begin[size_t(c - 1)] && p.begin[size_t(c)] < l.N,
             "lora_apply: fused target {} starts at column {} (after {}, before {} expected)", c, p.begin[size_t(c)],
             p.begin[size_t(c - 1)], l.N);
}

}  // namespace gs
