// CUDA kernels of tensor parallelism (shard_kernels.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace gs::cuda {

// out[t, :] = table[ids[t] - first, :] when 0 <= ids[t] - first < V, else 0 (vocab-parallel embedding).
template <typename T, typename O>
cudaError_t embedding_shard(const int32_t* ids, const T* table, int64_t first, O* out, int T_, int V, int H,
                            cudaStream_t s);

}  // namespace gs::cuda
