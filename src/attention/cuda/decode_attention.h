// The decode attention kernels: batches whose requests all have few new tokens (decode,
// speculative verification), each with the contract of prefill_attention (prefill_attention.h):
// cache writes of tokens t < T, causal attention of each request's new queries over its context,
// zero rows for tokens of no request. Which one runs a launch is chosen by
// select_attention_kernel (attention/attention_kernel_selection.h). With a split workspace in p,
// the tensor-core kernels split each context over several CTAs (decode_splits).
#pragma once
#include <cuda_runtime.h>

#include "attention/attention_kernel_selection.h"
#include "attention/cuda/paged_attention_params.h"
#include "ops/kernel_options.h"

namespace gs::cuda {

// The tensor-core kernel (tensor_core_attention.cuh) with 64-row tiles, each context split over
// several CTAs when p has a split workspace (flash-decoding: the split count from the padded
// shape, the splits used from the actual context; the last CTA of each split group merges).
cudaError_t tensor_core_decode_attention(const PagedAttentionParams& p, const AttentionKernelOptions& o, int window,
                                         int T, cudaStream_t s);

// The same contract for single-token decode (every request at most one new token), on the kernel
// with the keys as the MMA's rows (keys_as_rows_kernel.cuh); hq / hkv <= kKeysAsRowsMaxGroup; contexts
// split as tensor_core_decode_attention splits them.
cudaError_t keys_as_rows_decode_attention(const PagedAttentionParams& p, const AttentionKernelOptions& o, int window,
                                          int T, cudaStream_t s);

// The same contract for decode batches (short queries) at head dim 128, hq / hkv <=
// kWarpPerPairMaxGroup, on CUDA cores: one or more warps per (request, kv head) pair
// (warp_per_pair_kernel.cuh).
cudaError_t warp_per_pair_decode_attention(const PagedAttentionParams& p, const AttentionKernelOptions& o, int window,
                                           int T, cudaStream_t s);

// Keys of one K/V tile of the tensor-core kernels (the unit a context is split in).
constexpr int kDecodeTileKeys = 64;
// The most parts a context is split in (a merging warp holds two parts a lane).
constexpr int kMaxDecodeSplits = 64;
// How a decode launch splits its contexts over grid z: into at most `splits` parts (the grid's,
// from the padded shape); a context of n tiles uses min(splits, max(base, ceil(n / max_tiles)),
// n / min_tiles) of them (tensor_core::split_range). The base count keeps a small batch's CTAs
// busy; a long context splits further, so that no part holds more than max_tiles tiles (0: no
// such limit), and none fewer than min_tiles.
struct DecodeSplit {
  int splits = 1, base = 1, min_tiles = 1, max_tiles = 0;
};

// The split of a tensor-core decode launch of T tokens and gx CTAs along x, from the padded shape
// alone (num_reqs_padded, the block table's reach, T): base = o.decode_split_target CTAs (where 0:
// `wave`, the CTAs the GPU holds at once of the kernel launched, less its tail column's hkv) over
// the (request, kv head) pairs, the tiles a part from o.decode_split_min_tiles / max_tiles; one
// part without a workspace, or when the workspace or the counters are too small.
DecodeSplit decode_splits(const PagedAttentionParams& p, const AttentionKernelOptions& o, int T, int gx, int wave);

}  // namespace gs::cuda
