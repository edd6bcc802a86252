// Host helpers of the CUDA backend's op files (cuda_backend.cpp, cuda_lora_ops.cpp): tensor
// checks with messages naming the op and argument, typed pointers, a side stream.
#pragma once
#include <cuda_runtime.h>

#include "core/cuda/cuda_check.h"
#include "core/error.h"
#include "core/tensor.h"

namespace gs::cuda_backend {

inline void need(const Tensor& t, DType d, const char* op, const char* name) {
  GS_CHECK(t.defined(), "{}: {} is undefined", op, name);
  GS_CHECK(t.device().is_cuda(), "{}: {} must be on the GPU, got {}", op, name, t.str());
  GS_CHECK(t.dtype() == d, "{}: {} must be {}, got {}", op, name, dtype_name(d), t.str());
}
inline void need_rows(const Tensor& t, int64_t rows, int64_t cols, const char* op, const char* name) {
  GS_CHECK(t.ndim() >= 1 && t.dim(0) == rows && t.row_elems() == cols, "{}: {} must be [{}, {}], got {}", op, name,
           rows, cols, t.str());
}
template <typename T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.data());
}

// A stream beside a backend's own, with the two events that fork work onto it and join it back
// (captured as graph edges when the main stream is capturing). RAII.
struct SideStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
  explicit SideStream(int device) {
    GS_CUDA_CHECK(cudaSetDevice(device));
    GS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    GS_CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    GS_CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  }
  ~SideStream() {
    if (join) cudaEventDestroy(join);
    if (fork) cudaEventDestroy(fork);
    if (stream) cudaStreamDestroy(stream);
  }
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;
};

}  // namespace gs::cuda_backend
