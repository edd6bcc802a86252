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
  int planes = 2;  // K and V; 1: multi-head latent attention's latent rows (k only)
  // Bytes of one block across K and V of one layer.
  size_t block_bytes() const {
    return size_t(planes) * size_t(block_size) * size_t(num_kv_heads) * size_t(head_dim) * dtype_size(dtype);
  }
};

struct KVCacheLayer {
  Tensor k;  // [num_blocks, block_size, num_kv_heads, head_dim]
  Tensor v;  // same; undefined for multi-head latent attention (attention/mla_attention.h)
};

}  // namespace gs
