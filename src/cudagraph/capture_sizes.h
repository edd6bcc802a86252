// The capture sizes (padded token counts that get graphs) of a configuration (docs/CUDA_GRAPHS.md §6).
#pragma once
#include <vector>

#include "cudagraph/compilation_config.h"

namespace gs {

// vLLM's default list: 1, 2, 4, then steps of 8 up to `max_size`.
std::vector<int> default_capture_sizes(int max_size);

// The sizes to capture, ascending: cfg.cudagraph_capture_sizes, or the defaults up to
// cfg.max_cudagraph_capture_size (0: min(max_num_seqs * 2, 256)); never above
// max_num_batched_tokens (a forward never runs more tokens). Empty when the mode is NONE.
std::vector<int> resolve_capture_sizes(const CompilationConfig& cfg, int max_num_seqs, int max_num_batched_tokens);

// The sizes that get piecewise (mixed) graphs in `mode` (docs/CUDA_GRAPHS.md §8). With separate
// FULL decode graphs (FULL_AND_PIECEWISE) piecewise graphs serve only prefill and mixed batches,
// and every one of the (pieces x sizes) graphs costs device memory of its own: the capture
// sizes that are powers of two from 8, plus the largest (which keeps the range). Otherwise, or
// with `dense`, every capture size. `capture_sizes` ascending.
std::vector<int> piecewise_capture_sizes(CUDAGraphMode mode, const std::vector<int>& capture_sizes, bool dense = false);

}  // namespace gs
