// The flash-decoding kernel: CUDA cores, any dtype (bf16 or f32), head dim up to
// kMaxAttentionHeadDim, logit soft-capping; the fallback for what the tensor-core kernels do not
// hold (attention/attention_kernel_selection.h).
#pragma once
#include <cuda_runtime.h>

#include "attention/cuda/paged_attention_params.h"

namespace gs::cuda {

// How many CTAs each query token's context is split over for this padded shape (1 = no split):
// enough to fill the GPU when T x kv-head groups is small, at most one per 32 keys of the
// longest context the block table can address.
int attention_splits(int T, int hq, int hkv, int max_context);

// One kernel: writes cache[slot_mapping[t]] = k[t], v[t] for t < T (slots < 0 or >= num_slots
// skipped), and computes causal paged attention of each of the T query tokens over its
// request's context (the new positions read straight from k and v, so no CTA waits on another's
// cache write); tokens of no request, and requests with an empty context, get zero output rows.
// Splits each context over attention_splits(...) CTAs when p has a workspace; the last CTA of
// each (token, head group) to finish merges the partial softmax states (an atomic counter that
// it resets), so the split path is one kernel too.
cudaError_t flash_decoding_attention(const PagedAttentionParams& p, int T, cudaStream_t s);

}  // namespace gs::cuda
