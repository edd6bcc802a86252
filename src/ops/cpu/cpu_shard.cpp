// CPU kernels of tensor parallelism: the vocab-parallel embedding.
#include <cstring>

#include "ops/cpu/cpu_kernels.h"

namespace gs::cpu {

void embedding_shard(const int32_t* ids, const float* table, int64_t first, float* out, int64_t T, int64_t V,
                     int64_t H) {
  for (int64_t t = 0; t < T; ++t) {
    const int64_t row = int64_t(ids[t]) - first;
    float* o = out + t * H;
    if (row >= 0 && row < V)
      std::memcpy(o, table + row * H, size_t(H) * sizeof(float));
    else
      std::memset(o, 0, size_t(H) * sizeof(float));
  }
}

}  // namespace gs::cpu
