// Cascade attention on the CUDA backend (attention/cascade.h): a batch whose requests share their
// first P context tokens (the leading block-table columns) runs its attention in three launches.
//  1. The prefix pass: every query of the batch, its tokens taken as one run (all requests' query
//     rows of a kv head fill the tensor-core tiles together), against keys [0, P) through
//     block-table row 0, with no causal mask (every query lies after the prefix), the prefix split
//     over CTAs; each split's softmax partial (m, l, O / l) goes to a slot of the workspace.
//  2. The suffix pass: the launch the batch would otherwise run (its cache write included),
//     attending only each request's keys from P on, its partial to the last slot.
//  3. The merge: each (token, head)'s partials combined by their log-sum-exp into out; rows of
//     tokens of no request become zeros.
// The shared prefix's KV is read once per tile of the batch's queries instead of once per request.
// Cascade steps run eagerly (never inside a FULL graph), but the launches, like every attention
// launch, read their per-batch values from the metadata's device buffers.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "attention/attention_kernel_selection.h"
#include "attention/cuda/paged_attention_params.h"
#include "ops/kernel_options.h"

namespace gs::cuda {

// The most tokens (q rows) a cascade launch takes; larger batches attend without cascading.
constexpr int kCascadeMaxTokens = 512;

// Floats of the partials workspace for hq heads of dimension D: two slots (one prefix split and
// the suffix) for kCascadeMaxTokens tokens; fewer tokens leave room for more prefix splits.
size_t cascade_workspace_floats(int hq, int D);

// The three launches on p (a plain launch's parameters) with shared prefix `prefix_len` (> 0, a
// multiple of nothing in particular, at most every request's tokens computed before this step),
// over T q rows (T <= kCascadeMaxTokens), the suffix on `suffix` (TensorCorePrefill or
// TensorCoreDecode), with `workspace` of cascade_workspace_floats(p.hq, p.D) floats.
// cudaErrorInvalidValue when the launch does not fit (T, the workspace, a kernel the tensor-core
// kernels do not hold).
cudaError_t cascade_attention(const PagedAttentionParams& p, const AttentionKernelOptions& o, AttentionKernel suffix,
                              int prefix_len, int T, float* workspace, cudaStream_t s);

}  // namespace gs::cuda
