// Shape checks of the batched LoRA ops, shared by the CPU and CUDA backends.
#pragma once
#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"

namespace gs {

struct LoraShape {
  int64_t T, C, S, R;  // tokens, columns of x (shrink) or y (expand), slots, rank rows
};

// rows: x [T, K] (shrink) or y [T, N] (expand); w: a [S, R, K] or bt [S, R, N]; tmp [T, R].
inline LoraShape check_lora_shape(const Tensor& rows, const Tensor& w, const Tensor& slots, const Tensor& tmp,
                                  const char* op) {
  const int64_t T = rows.dim(0), C = rows.row_elems();
  GS_CHECK(w.ndim() == 3 && w.dim(2) == C, "{}: weights {} must be [S, R, {}]", op, w.str(), C);
  GS_CHECK(tmp.ndim() == 2 && tmp.dim(0) == T && tmp.dim(1) == w.dim(1), "{}: tmp {} must be [{}, {}]", op, tmp.str(),
           T, w.dim(1));
  GS_CHECK(slots.numel() >= T, "{}: slots {} has fewer than {} rows", op, slots.str(), T);
  return {T, C, w.dim(0), w.dim(1)};
}

}  // namespace gs
