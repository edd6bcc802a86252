// CudaLoraOps: the CUDA backend's batched LoRA ops (Backend::lora_shrink, lora_expand and the
// expands fused into the op after the projection): checks, dtype dispatch to ops/cuda/lora_kernels.h,
// the side stream a one-token shrink forks onto, under LoraKernelOptions (ops/kernel_options.h).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/backend.h"
#include "ops/cuda/backend_util.h"
#include "ops/kernel_options.h"
#include "ops/lora_shape.h"

namespace gs {

class CudaLoraOps {
 public:
  CudaLoraOps(int device, DType dtype, const LoraKernelOptions& options)
      : dtype_(dtype), options_(options), side_(device) {}

  // Backend::lora_shrink / lora_expand on stream s. At one token the shrink runs on the side
  // stream, forked from s (beside the GEMV enqueued next); the next expand (or fused op) joins it.
  void shrink(const Tensor& x, const Tensor& a, const Tensor& slots, const Tensor& tmp, cudaStream_t s);
  void expand(const Tensor& tmp, const Tensor& bt, const Tensor& slots, const Tensor& y, const LoraParts& parts,
              cudaStream_t s);

  // The fused expands as one kernel each; false where they launch nothing (the shape or token
  // count does not take the fused kernel): the caller then runs Backend's default (the expand,
  // then the plain op). The caller has checked the consuming op's own arguments.
  // split_qkv_rope without q/k norm; inv_freq: the rope config's table (f32), D its head_dim.
  bool expand_split_qkv_rope(const Tensor& tmp, const Tensor& bt, const Tensor& slots, const LoraParts& parts,
                             const Tensor& qkv, const Tensor& positions, const Tensor& inv_freq, int D, int long_from,
                             const Tensor& q, const Tensor& k, const Tensor& v, cudaStream_t s);
  bool expand_gated_activation(GatedActivation act, const Tensor& tmp, const Tensor& bt, const Tensor& slots,
                               const Tensor& gate_up, const LoraParts& parts, const Tensor& out, cudaStream_t s);
  bool expand_add_rms_norm(const Tensor& tmp, const Tensor& bt, const Tensor& slots, const Tensor& residual,
                           const Tensor& x, const Tensor& w, float eps, const Tensor& out, cudaStream_t s);
  // Backend::lora_stacked: whether the fused op takes the stacked shrink at this shape. Tmp
  // undefined in the calls above means that form (they then always launch, or throw).
  bool stacked(const LoraFusedShape& shape) const;

 private:
  void join(cudaStream_t s);  // s waits for a forked shrink (before the op that reads its tmp)
  // Whether the fused expands run one kernel at T tokens: not at one token (the fused ops' single
  // blocks per token are slower there than the unfused expand's many), else below
  // options_.fuse_below_tokens.
  bool fused(int64_t T) const { return T >= 2 && T < options_.fuse_below_tokens; }
  void check_tmp_bt(const Tensor& tmp, const Tensor& bt, const char* op) const;
  static bool launched(bool done, const Tensor& tmp, const char* op);
  // A fused expand's launch: joins a forked shrink, then calls f(e, tmp view, y pointer, &err)
  // with e of the compute dtype's element type and the tmp form of `tmp` (lora_shrink's, or the
  // stacked one in y); f returns whether its kernel launched. Checks err, then launched().
  template <typename F>
  bool run_fused(const Tensor& tmp, const Tensor& y, const LoraShape& l, const char* op, cudaStream_t s, F&& f);
  // The stacked shrink up to this many tokens: decode batches, where a GEMM is bound by its
  // weight reads and the stacked rows (~4% more on llama3.2-1b at 8 rank-16 slots) cost little
  // next to the shrink kernels they replace; prefill keeps lora_shrink.
  static constexpr int64_t kStackedUpTo = 256;

  DType dtype_;
  LoraKernelOptions options_;
  cuda_backend::SideStream side_;
  bool joined_ = true;  // false from a forked shrink to the expand that joins it
};

}  // namespace gs
