// KVCacheLayer: the K and V cache tensors of one attention layer, paged in blocks.
#pragma once
#include "core/tensor.h"

namespace gs {

struct KVCacheSpec {
  int num_blocks = 0;
  int block_size = 16;
  int num_kv_heads = 0;
  int head_dim = 0;
  DType dtype = DType::F32;
  // Bytes of one block across K and V of one layer.
  size_t block_bytes() const {
    return size_t(2) * size_t(block_size) * size_t(num_kv_heads) * size_t(head_dim) * dtype_size(dtype);
  }
};

struct KVCacheLayer {
  Tensor k;  // [num_blocks, block_size, num_kv_heads, head_dim]
  Tensor v;  // same
};

}  // namespace gs
