// KVCacheLayer: the K and V cache tensors of one attention layer, paged in blocks.
//
// The cache holds the compute dtype, or e4m3 (--kv-cache-dtype fp8): then a row is written as
// e4m3(x * (1 / scale)) (round to nearest even, saturating at +-448) and read as e4m3 * scale,
// with one scale per layer for K and one for V (the checkpoint's self_attn.k_scale / v_scale,
// else 1.0). Every position attention reads goes through the cache's precision, this step's
// new tokens included, as vLLM's FP8 KV cache does.
#pragma once
#include <cmath>

#include "core/tensor.h"

namespace gs {

struct KVCacheSpec {
  int num_blocks = 0;
  int block_size = 16;
  int num_kv_heads = 0;
  int head_dim = 0;
  DType dtype = DType::F32;  // the compute dtype, or F8E4M3
  int planes = 2;            // K and V; 1: multi-head latent attention's latent rows (k only)
  // Bytes of one block across K and V of one layer.
  size_t block_bytes() const {
    return size_t(planes) * size_t(block_size) * size_t(num_kv_heads) * size_t(head_dim) * dtype_size(dtype);
  }
};

struct KVCacheLayer {
  Tensor k;  // [num_blocks, block_size, num_kv_heads, head_dim]
  Tensor v;  // same; undefined for multi-head latent attention (attention/mla_attention.h)
  // Dequantization scales of an e4m3 cache (value = stored * scale); 1 for a float cache.
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  bool fp8() const { return k.defined() && k.dtype() == DType::F8E4M3; }
  // Both scales finite and > 0 (what the backends check before attending).
  bool scales_valid() const { return std::isfinite(k_scale) && k_scale > 0 && std::isfinite(v_scale) && v_scale > 0; }
};

}  // namespace gs
