// Implements ops/cuda/cuda_lora_ops.h.
#include "ops/cuda/cuda_lora_ops.h"

#include <climits>

#include "ops/cuda/lora_kernels.h"
#include "ops/lora_shape.h"

namespace gs {

namespace {

using cuda::bf16_t;
using cuda_backend::need;
using cuda_backend::need_rows;
using cuda_backend::ptr;

cuda::LoraColumnParts column_parts(const LoraParts& parts, const LoraShape& l) {
  cuda::LoraColumnParts cols{int(l.R / parts.n)};
  if (parts.n > 1) cols.begin1 = int(parts.begin[1]);
  if (parts.n > 2) cols.begin2 = int(parts.begin[2]);
  return cols;
}

// The device pointer of the per-token slots (shapes checked by check_lora_shrink / check_lora_expand).
const int32_t* slots_of(const Tensor& slots, const char* op) {
  need(slots, DType::I32, op, "slots");
  return ptr<int32_t>(slots);
}

// Calls f with a value of the element type of dtype (bf16_t or float).
template <typename F>
void by_dtype(DType dtype, F&& f) {
  if (dtype == DType::F32)
    f(float{});
  else
    f(bf16_t{});
}

// Calls f(tmp, y) with the fused kernels' view of the rank-R intermediate and y's pointer:
// lora_shrink's f32 tmp and y in the compute dtype E, or (tmp undefined: Backend::lora_stacked)
// both inside the stacked GEMM's f32 output (the shrink in its columns from N).
template <typename E, typename F>
void with_tmp_y(const Tensor& tmp, const Tensor& y, const LoraShape& l, F&& f) {
  if (tmp.defined())
    f(cuda::LoraTmp{ptr<float>(tmp), l.R, 0}, ptr<E>(y));
  else
    f(cuda::LoraTmp{ptr<float>(y) + l.N, y.row_elems(), l.R}, ptr<float>(y));
}

}  // namespace

void CudaLoraOps::join(cudaStream_t s) {
  if (joined_) return;
  GS_CUDA_CHECK(cudaStreamWaitEvent(s, side_.join, 0));
  joined_ = true;
}

void CudaLoraOps::check_tmp_bt(const Tensor& tmp, const Tensor& bt, const char* op) const {
  if (tmp.defined()) need(tmp, DType::F32, op, "tmp");
  need(bt, dtype_, op, "bt");
}

// The fused kernels' limits (lora_kernels.h), for the shapes the model asks about; the stacked
// shrink from 2 tokens (one token keeps the GEMV and the forked shrink) up to kStackedUpTo, where
// options_.stacked_shrink allows it.
bool CudaLoraOps::stacked(const LoraFusedShape& sh) const {
  if (!options_.stacked_shrink || !fused(sh.tokens) || sh.tokens > kStackedUpTo || sh.width % 8 != 0) return false;
  switch (sh.op) {
    case LoraFusedOp::SplitQkvRope:
      return sh.head_dim == 32 || sh.head_dim == 64 || sh.head_dim == 128 || sh.head_dim == 256;
    case LoraFusedOp::GatedActivation: return sh.width % 16 == 0 && sh.tokens < 64;
    case LoraFusedOp::AddRmsNorm: return sh.width % 8 == 0 && sh.width <= 8192;
  }
  return false;
}

// A fused kernel that launched nothing: fine with lora_shrink's tmp (the caller falls back to
// the expand and the plain op), an error in the stacked form (lora_stacked() promised it).
bool CudaLoraOps::launched(bool done, const Tensor& tmp, const char* op) {
  GS_CHECK(done || tmp.defined(), "{}: the stacked LoRA shrink reached a shape the fused kernel does not take", op);
  return done;
}

void CudaLoraOps::shrink(const Tensor& x, const Tensor& a, const Tensor& slots_t, const Tensor& tmp, cudaStream_t s) {
  need(x, dtype_, "lora_shrink", "x"), need(a, dtype_, "lora_shrink", "a"), need(tmp, DType::F32, "lora_shrink", "tmp");
  const LoraShape l = check_lora_shrink(x, a, slots_t, tmp);
  const int32_t* slots = slots_of(slots_t, "lora_shrink");
  const bool fork = l.T <= options_.fork_up_to_tokens;
  cudaStream_t on = s;
  if (fork) {
    GS_CUDA_CHECK(cudaEventRecord(side_.fork, s));
    GS_CUDA_CHECK(cudaStreamWaitEvent(side_.stream, side_.fork, 0));
    on = side_.stream;
  }
  by_dtype(dtype_, [&](auto e) {
    using E = decltype(e);
    GS_CUDA_CHECK(
        cuda::lora_shrink(ptr<E>(x), ptr<E>(a), slots, ptr<float>(tmp), int(l.T), int(l.K), int(l.R), int(l.S), on));
  });
  if (fork) {
    GS_CUDA_CHECK(cudaEventRecord(side_.join, side_.stream));
    joined_ = false;
  }
}

void CudaLoraOps::expand(const Tensor& tmp, const Tensor& bt, const Tensor& slots_t, const Tensor& y,
                         const LoraParts& parts, cudaStream_t s) {
  check_tmp_bt(tmp, bt, "lora_expand"), need(y, dtype_, "lora_expand", "y");
  const LoraShape l = check_lora_expand(tmp, bt, slots_t, y);
  check_lora_parts(parts, l);
  const int32_t* slots = slots_of(slots_t, "lora_expand");
  join(s);
  by_dtype(dtype_, [&](auto e) {
    using E = decltype(e);
    GS_CUDA_CHECK(cuda::lora_expand(ptr<float>(tmp), ptr<E>(bt), slots, ptr<E>(y), int(l.T), int(l.R), int(l.N),
                                    int(l.S), column_parts(parts, l), s));
  });
}

template <typename F>
bool CudaLoraOps::run_fused(const Tensor& tmp, const Tensor& y, const LoraShape& l, const char* op, cudaStream_t s,
                            F&& f) {
  join(s);
  bool done = false;
  by_dtype(dtype_, [&](auto e) {
    with_tmp_y<decltype(e)>(tmp, y, l, [&](auto tv, auto* yp) {
      cudaError_t err = cudaSuccess;
      done = f(e, tv, yp, &err);
      GS_CUDA_CHECK(err);
    });
  });
  return launched(done, tmp, op);
}

bool CudaLoraOps::expand_split_qkv_rope(const Tensor& tmp, const Tensor& bt, const Tensor& slots_t,
                                        const LoraParts& parts, const Tensor& qkv, const Tensor& positions,
                                        const Tensor& inv_freq, int D, int long_from, const Tensor& q, const Tensor& k,
                                        const Tensor& v, cudaStream_t s) {
  const char* op = "lora_expand_split_qkv_rope";
  check_tmp_bt(tmp, bt, op);
  const LoraShape l = check_lora_expand_or_stacked(tmp, bt, slots_t, qkv);
  check_lora_parts(parts, l);
  const int32_t* slots = slots_of(slots_t, op);
  if (!fused(l.T) || parts.n != 3) return launched(false, tmp, op);
  return run_fused(tmp, qkv, l, op, s, [&](auto e, auto tv, auto* y, cudaError_t* err) {
    using E = decltype(e);
    return cuda::lora_expand_split_qkv_rope<E>(tv, ptr<E>(bt), slots, column_parts(parts, l), int(l.R), int(l.S), y,
                                               qkv.row_elems(), ptr<int32_t>(positions), ptr<float>(inv_freq),
                                               ptr<E>(q), ptr<E>(k), ptr<E>(v), int(l.T), int(q.row_elems() / D),
                                               int(k.row_elems() / D), D, long_from, s, err);
  });
}

bool CudaLoraOps::expand_gated_activation(GatedActivation act, const Tensor& tmp, const Tensor& bt,
                                          const Tensor& slots_t, const Tensor& gate_up, const LoraParts& parts,
                                          const Tensor& out, cudaStream_t s) {
  const char* op = "lora_expand_gated_activation";
  check_tmp_bt(tmp, bt, op), need(out, dtype_, op, "out");
  need(gate_up, tmp.defined() ? dtype_ : DType::F32, op, "gate_up");
  const LoraShape l = check_lora_expand_or_stacked(tmp, bt, slots_t, gate_up);
  check_lora_parts(parts, l);
  const int64_t I = out.row_elems();
  need_rows(out, l.T, I, op, "out");
  GS_CHECK(l.N == 2 * I, "{}: gate_up {} must be [{}, 2 x {}]", op, gate_up.str(), l.T, I);
  const int32_t* slots = slots_of(slots_t, op);
  if (!fused(l.T) || parts.n != 2 || parts.begin[1] != I) return launched(false, tmp, op);
  return run_fused(tmp, gate_up, l, op, s, [&](auto e, auto tv, auto* y, cudaError_t* err) {
    using E = decltype(e);
    return cuda::lora_expand_gated_activation<E>(act, tv, ptr<E>(bt), slots, y, gate_up.row_elems(), ptr<E>(out),
                                                 int(l.T), int(I), int(l.R), int(l.S), s, err);
  });
}

bool CudaLoraOps::expand_add_rms_norm(const Tensor& tmp, const Tensor& bt, const Tensor& slots_t,
                                      const Tensor& residual, const Tensor& x, const Tensor& w, float eps,
                                      const Tensor& out, cudaStream_t s) {
  const char* op = "lora_expand_add_rms_norm";
  check_tmp_bt(tmp, bt, op);
  const LoraShape l = check_lora_expand_or_stacked(tmp, bt, slots_t, x);
  GS_CHECK(tmp.defined() || out.data() != x.data(), "{}: out must not alias the stacked-shrink x", op);
  const int32_t* slots = slots_of(slots_t, op);
  if (!fused(l.T)) return launched(false, tmp, op);
  return run_fused(tmp, x, l, op, s, [&](auto e, auto tv, auto* y, cudaError_t* err) {
    using E = decltype(e);
    auto run = [&](auto* res) {
      return cuda::lora_expand_add_rms_norm(tv, ptr<E>(bt), slots, res, y, x.row_elems(), ptr<E>(w), eps, ptr<E>(out),
                                            int(l.T), int(l.N), int(l.R), int(l.S), s, err);
    };
    return residual.dtype() == DType::F32 ? run(ptr<float>(residual)) : run(ptr<E>(residual));
  });
}

}  // namespace gs
