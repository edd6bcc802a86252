// Tensor-parallel kernels: the vocab-parallel embedding (each rank's rows, zeros elsewhere).
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/shard_kernels.h"

namespace gs::cuda {

namespace {

template <typename T, typename O>
__global__ void embedding_shard_kernel(const int32_t* ids, const T* table, int64_t first, O* out, int V, int H) {
  pdl_wait();
  pdl_trigger();
  const int64_t t = blockIdx.x;
  const int64_t row = int64_t(ids[t]) - first;
  O* o = out + t * H;
  const bool ok = row >= 0 && row < V;
  const T* src = table + (ok ? row : 0) * H;
  for (int i = threadIdx.x; i < H; i += blockDim.x) o[i] = from_f<O>(ok ? to_f(src[i]) : 0.0f);
}

}  // namespace

template <typename T, typename O>
cudaError_t embedding_shard(const int32_t* ids, const T* table, int64_t first, O* out, int T_, int V, int H,
                            cudaStream_t s) {
  if (T_ <= 0) return cudaGetLastError();
  return launch_pdl(embedding_shard_kernel<T, O>, T_, 256, 0, s, ids, table, first, out, V, H);
}

template cudaError_t embedding_shard<bf16_t, bf16_t>(const int32_t*, const bf16_t*, int64_t, bf16_t*, int, int, int,
                                                     cudaStream_t);
template cudaError_t embedding_shard<bf16_t, float>(const int32_t*, const bf16_t*, int64_t, float*, int, int, int,
                                                    cudaStream_t);
template cudaError_t embedding_shard<float, float>(const int32_t*, const float*, int64_t, float*, int, int, int,
                                                   cudaStream_t);

}  // namespace gs::cuda
