// Resolving the requested cudagraph mode to what the attention backends support (docs/CUDA_GRAPHS.md §7).
#pragma once
#include <string>
#include <vector>

#include "attention/cg_support.h"
#include "cudagraph/cudagraph_mode.h"

namespace gs {

struct BackendCGSupport {
  std::string backend;  // attention backend name, for the warnings
  AttentionCGSupport support = AttentionCGSupport::ALWAYS;
};

// The lowest support over all attention backends of a model (ALWAYS when there are none).
BackendCGSupport min_cg_support(const std::vector<BackendCGSupport>& backends);

struct ModeResolution {
  CUDAGraphMode mode = CUDAGraphMode::NONE;
  std::vector<int> capture_sizes;     // ascending; rounded up to multiples of q under docs/CUDA_GRAPHS.md §7 rule 5
  std::vector<std::string> warnings;  // one per change, already logged
};

// docs/CUDA_GRAPHS.md §7, in order. `piecewise` means attention is a splitting op (the piecewise split exists);
// without it PIECEWISE becomes NONE and FULL_AND_PIECEWISE becomes FULL first, as vLLM does with
// empty splitting ops. Every change is logged as a warning (and returned).
ModeResolution resolve_cudagraph_mode(CUDAGraphMode requested, const BackendCGSupport& min_support, bool piecewise,
                                      int uniform_query_len, std::vector<int> capture_sizes);

}  // namespace gs
