// Implements core/cuda/cuda_allocator.h (CudaAllocator).
#include "core/cuda/cuda_allocator.h"

#include <cuda_runtime.h>

#include "core/cuda/cuda_check.h"
#include "core/logging.h"

namespace gs {

void* CudaAllocator::do_allocate(size_t bytes) {
  GS_CUDA_CHECK(cudaSetDevice(device_));
  void* p = nullptr;
  // Zero-byte tensors still get a real (distinct, non-null) address.
  const size_t n = bytes == 0 ? 256 : bytes;
  const cudaError_t e = cudaMalloc(&p, n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    fail(
        "out of GPU memory on cuda:{}: cannot allocate {} bytes ({} of {} bytes free): {}; lower "
        "--gpu-memory-utilization, --max-num-seqs or --max-model-len",
        device_, bytes, free_b, total_b, cudaGetErrorString(e));
  }
  return p;
}

void CudaAllocator::do_deallocate(void* p, size_t) {
  // Called from destructors: report, never throw.
  const cudaError_t e = cudaFree(p);
  if (e != cudaSuccess) {
    cudaGetLastError();
    spdlog::error("cudaFree failed on cuda:{}: {}", device_, cudaGetErrorString(e));
  }
}

}  // namespace gs
