// Launchers of the CUDA sampling kernels (sampling_kernels.cu); each returns the launch's error.
#pragma once
#include <cuda_runtime.h>

#include "sampling/sampling_kernels.h"

namespace gs::cuda {

// One CTA per row: the rule of sampling_rule.h with block-parallel passes over the row.
cudaError_t sample(const SampleArgs& a, cudaStream_t s);
cudaError_t reset_slot(const SlotArgs& a, cudaStream_t s);

}  // namespace gs::cuda
