// The CUDA sampling kernels behind the SamplingKernels interface.
#pragma once
#include <memory>

#include "sampling/sampling_kernels.h"

namespace gs {

// `backend` must be the CUDA backend (its stream is used).
std::unique_ptr<SamplingKernels> make_cuda_sampling_kernels(Backend& backend);

}  // namespace gs
