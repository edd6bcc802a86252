// Shape checks of the batched LoRA ops (Backend::lora_shrink, lora_expand), shared by the CPU and
// CUDA backends.
#pragma once
#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"
#include "ops/backend.h"

namespace gs {

struct LoraShape {
  int64_t T, K, N, S, R;  // tokens, columns of x (shrink), columns of y (expand), slots, rank rows
};

// The shrink: x [T, K], a [S, R, K], slots [>= T], tmp [T, R].
inline LoraShape check_lora_shrink(const Tensor& x, const Tensor& a, const Tensor& slots, const Tensor& tmp) {
  const int64_t T = x.dim(0), K = x.row_elems();
  GS_CHECK(a.ndim() == 3 && a.dim(2) == K, "lora_shrink: a {} must be [S, R, {}]", a.str(), K);
  GS_CHECK(tmp.ndim() == 2 && tmp.dim(0) == T && tmp.dim(1) == a.dim(1), "lora_shrink: tmp {} must be [{}, {}]",
           tmp.str(), T, a.dim(1));
  GS_CHECK(slots.numel() >= T, "lora_shrink: slots {} has fewer than {} rows", slots.str(), T);
  return {T, K, 0, a.dim(0), a.dim(1)};
}

// The expand: tmp [T, R], bt [S, R, N], slots [>= T], y [T, N].
inline LoraShape check_lora_expand(const Tensor& tmp, const Tensor& bt, const Tensor& slots, const Tensor& y) {
  const int64_t T = y.dim(0), N = y.row_elems();
  GS_CHECK(bt.ndim() == 3 && bt.dim(2) == N, "lora_expand: bt {} must be [S, R, {}]", bt.str(), N);
  GS_CHECK(tmp.ndim() == 2 && tmp.dim(0) == T && tmp.dim(1) == bt.dim(1), "lora_expand: tmp {} must be [{}, {}]",
           tmp.str(), T, bt.dim(1));
  GS_CHECK(slots.numel() >= T, "lora_expand: slots {} has fewer than {} rows", slots.str(), T);
  return {T, 0, N, bt.dim(0), bt.dim(1)};
}

// The stacked form (Backend::lora_stacked; tmp undefined): bt [S, R, N], slots [>= T],
// y [T, N + lora_stacked_width(S, R)]; else check_lora_expand.
inline LoraShape check_lora_expand_or_stacked(const Tensor& tmp, const Tensor& bt, const Tensor& slots,
                                              const Tensor& y) {
  if (tmp.defined()) return check_lora_expand(tmp, bt, slots, y);
  GS_CHECK(bt.ndim() == 3, "lora_expand: bt {} must be [S, R, N]", bt.str());
  const int64_t T = y.dim(0), S = bt.dim(0), R = bt.dim(1), N = bt.dim(2);
  GS_CHECK(y.dtype() == DType::F32 && y.row_elems() == N + lora_stacked_width(S, R),
           "lora_expand (stacked shrink): y {} must be f32 [{}, {} + {}] (the projection, then every slot's shrink)",
           y.str(), T, N, lora_stacked_width(S, R));
  GS_CHECK(slots.numel() >= T, "lora_expand: slots {} has fewer than {} rows", slots.str(), T);
  return {T, 0, N, S, R};
}

// A stand-in for y's [T, N] part in the compute dtype, for the consuming op's own shape checks
// (the stacked form's y is wider, and f32): never read or written through.
inline Tensor lora_projection_shape(const LoraShape& l, const Tensor& y, DType compute) {
  return Tensor::wrap(y.data(), {l.T, l.N}, compute, y.device());
}

// parts: 1 to 3 targets, each with its share of the rank rows and a non-empty column range of y.
inline void check_lora_parts(const LoraParts& p, const LoraShape& l) {
  GS_CHECK(p.n >= 1 && p.n <= 3 && l.R % p.n == 0, "lora_expand: {} fused targets over {} rank rows (1 to 3, dividing)",
           p.n, l.R);
  GS_CHECK(p.begin[0] == 0, "lora_expand: the first fused target starts at column {}, not 0", p.begin[0]);
  for (int c = 1; c < p.n; ++c)
    GS_CHECK(p.begin[size_t(c)] > p.begin[size_t(c - 1)] && p.begin[size_t(c)] < l.N,
             "lora_expand: fused target {} starts at column {} (after {}, before {} expected)", c, p.begin[size_t(c)],
             p.begin[size_t(c - 1)], l.N);
}

}  // namespace gs
