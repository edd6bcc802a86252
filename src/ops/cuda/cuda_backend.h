// The CUDA backend: bf16 or f32 storage (the compute dtype, chosen at construction), fp32
// accumulation, cuBLASLt GEMMs with a fixed workspace and a bandwidth-bound GEMV for small M,
// all enqueued on one non-default stream (graph-capturable).
#pragma once
#include <memory>

#include "ops/backend.h"
#include "ops/kernel_options.h"

namespace gs {

// Throws gs::Error when `device` does not exist (see cuda_device_count()) or `dtype` is not
// BF16 or F32 (float16 is not supported). `options`: its linear and LoRA kernel variants.
std::unique_ptr<Backend> make_cuda_backend(int device = 0, DType dtype = DType::BF16,
                                           const KernelOptions& options = {});

}  // namespace gs
