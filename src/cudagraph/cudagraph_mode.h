// CUDAGraphMode: the five graph modes (docs/CUDA_GRAPHS.md §2); NONE, PIECEWISE and FULL are also runtime modes.
#pragma once
#include <string_view>

namespace gs {

enum class CUDAGraphMode { NONE, PIECEWISE, FULL, FULL_DECODE_ONLY, FULL_AND_PIECEWISE };

std::string_view mode_name(CUDAGraphMode m);             // upper case, e.g. "FULL_AND_PIECEWISE"
CUDAGraphMode parse_cudagraph_mode(std::string_view s);  // upper case only; error lists valid ones

// The member used for non-uniform (mixed) batches and for uniform decode batches (docs/CUDA_GRAPHS.md §4).
CUDAGraphMode mixed_mode(CUDAGraphMode m);
CUDAGraphMode decode_mode(CUDAGraphMode m);
bool separate_routine(CUDAGraphMode m);
bool has_full_cudagraphs(CUDAGraphMode m);
bool has_piecewise_cudagraphs(CUDAGraphMode m);

}  // namespace gs
