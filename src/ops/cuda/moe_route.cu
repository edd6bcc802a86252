// The routing kernel: one thread a token, running ops/moe.h's moe_route_token (the CPU
// backend's arithmetic) on its router logits.
#include "ops/cuda/launch.cuh"
#include "ops/cuda/moe_kernels.h"

namespace gs::cuda {

namespace {

constexpr int kThreads = 64;

__global__ void moe_route_kernel(const float* logits, const float* bias, MoeRouting r, int32_t* ids, float* weights,
                                 int T_) {
  pdl_wait();
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= T_) return;
  float s[kMaxMoeExperts], c[kMaxMoeExperts];
  const int E = r.num_experts, k = r.top_k;
  moe_route_token(
      r, logits + int64_t(t) * E, [bias](int e) { return bias ? bias[e] : 0.0f; }, s, c, ids + int64_t(t) * k,
      weights + int64_t(t) * k);
}

}  // namespace

cudaError_t moe_route(const float* logits, const float* bias, const MoeRouting& r, int32_t* ids, float* weights, int T_,
                      cudaStream_t s) {
  if (T_ <= 0) return cudaGetLastError();
  return launch_pdl(moe_route_kernel, (T_ + kThreads - 1) / kThreads, kThreads, 0, s, logits, bias, r, ids, weights,
                    T_);
}

}  // namespace gs::cuda
