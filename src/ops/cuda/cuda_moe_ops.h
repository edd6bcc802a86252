// The CUDA backend's mixture-of-experts ops (Backend::moe_route, moe_experts): checks, dtype
// dispatch and the launch of the fused kernels (moe_kernels.h) on the backend's stream.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "ops/backend.h"
#include "ops/cuda/moe_kernels.h"

namespace gs {
class LtGemm;
}

namespace gs::cuda_backend {

void moe_route(const Tensor& logits, const Tensor& bias, const MoeRouting& r, const Tensor& ids, const Tensor& weights,
               cudaStream_t s);
// The dense form's GEMMs run on `gemm`. With `handoff` (a.then set, its tensors checked by the
// caller: residual f32 [1, H], weight bf16 [H], out bf16 [1, H]), where the small-batch path runs
// one token on bf16 compute, its fold adds out into a.then->residual and stores the norm
// handoff's xn into a.then->out instead of writing a.out (cuda::MoeNormHandoff); returns whether
// it did. a.then is otherwise left to the caller.
bool moe_experts(const MoeExpertsArgs& a, DType dtype, const MoeKernelOptions& opts, LtGemm& gemm, cudaStream_t s,
                 bool handoff = false);
// Backend::moe_workspace_bytes: the dense form's, for its largest batch of at most T tokens.
int64_t moe_workspace_bytes(const MoeKernelOptions& opts, DType dtype, int64_t T, int64_t k, int64_t E, int64_t I,
                            int64_t H, int64_t routed);
// The kernels moe_experts runs with `opts` (the start-up log names them).
std::string moe_kernels(const MoeKernelOptions& opts);

}  // namespace gs::cuda_backend
