// The FP8 KV cache's write (attention/kv_cache.h): this step's new k, v rows, quantized to e4m3
// with the layer's scales, into their cache slots. The attention launch on an e4m3 cache runs it
// before the prefill / tensor-core decode kernels, which then read every position from the cache
// (paged_attention_params.h); keys-as-rows decode writes its rows itself.
#pragma once
#include <cuda_runtime.h>

#include "attention/cuda/paged_attention_params.h"

namespace gs::cuda {

// Tokens t < T with a slot inside the cache (others are skipped): k_cache[slot] = e4m3(k[t] /
// k_scale), v likewise; bf16 k, v with D a multiple of 8 and 16-byte aligned rows.
cudaError_t write_fp8_kv_cache(const PagedAttentionParams& p, int T, cudaStream_t s);

}  // namespace gs::cuda
