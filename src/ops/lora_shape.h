// Shape checks of the batched LoRA op (Backend::lora_apply), shared by the CPU and CUDA backends.
#pragma once
#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"

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

}  // namespace gs
