// Implements core/cuda/cuda_device.h.
#include <cuda_runtime.h>

namespace gs {
// Number of usable CUDA devices (0 when there is no driver or no GPU).
int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}
}  // namespace gs
