// The CUDA backend: bf16 storage, fp32 accumulation, cuBLASLt GEMMs with a fixed workspace and a
// bandwidth-bound GEMV for small M, all enqueued on one non-default stream (graph-capturable).
#pragma once
#include <memory>

#include "ops/backend.h"

namespace gs {

// Throws gs::Error when `device` does not exist (see cuda_device_count()).
std::unique_ptr<Backend> make_cuda_backend(int device = 0);

}  // namespace gs
