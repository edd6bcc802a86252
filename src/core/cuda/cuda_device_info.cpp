// CUDA device queries of core/cuda/cuda_device.h: the GPUs present, their names, compute capability and free memory.
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_device.h"

namespace gs {

namespace {
void check_device(int device) {
  const int n = cuda_device_count();
  GS_CHECK(device >= 0 && device < n, "CUDA device {} does not exist ({} device(s) visible)", device, n);
}
void mem_info(int device, size_t* free_b, size_t* total_b) {
  check_device(device);
  GS_CUDA_CHECK(cudaSetDevice(device));
  GS_CUDA_CHECK(cudaMemGetInfo(free_b, total_b));
}
}  // namespace

int cuda_current_sm_count(int fallback) {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
    return fallback;
  return sms;
}

int cuda_kernel_wave(const void* kernel, int threads, size_t smem) {
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem) != cudaSuccess) return 0;
  return per_sm * cuda_current_sm_count(0);
}

CudaDeviceInfo cuda_device_info(int device) {
  check_device(device);
  cudaDeviceProp p{};
  GS_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  CudaDeviceInfo info;
  info.name = p.name;
  info.sm_count = p.multiProcessorCount;
  info.cc_major = p.major;
  info.cc_minor = p.minor;
  info.l2_bytes = size_t(p.l2CacheSize);
  mem_info(device, &info.free_memory, &info.total_memory);
  return info;
}

size_t cuda_free_memory(int device) {
  size_t f = 0, t = 0;
  mem_info(device, &f, &t);
  return f;
}

size_t cuda_total_memory(int device) {
  size_t f = 0, t = 0;
  mem_info(device, &f, &t);
  return t;
}

}  // namespace gs
