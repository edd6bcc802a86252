// AttentionCGSupport: how much CUDA-graph capture an attention backend supports (docs/CUDA_GRAPHS.md §7).
#pragma once
#include <string_view>

namespace gs {

enum class AttentionCGSupport : int {
  NEVER = 0,                        // no full graphs
  UNIFORM_SINGLE_TOKEN_DECODE = 1,  // full graphs only for q = 1 decode batches
  UNIFORM_BATCH = 2,                // full graphs for uniform batches of any q (spec decode)
  ALWAYS = 3,                       // full graphs for any batch, mixed prefill/decode included
};

std::string_view cg_support_name(AttentionCGSupport s);

}  // namespace gs
