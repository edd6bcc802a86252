// CudaStream: a non-default cudaStream_t whose captures become instantiated CUDA graphs.
//
// begin_capture() starts a thread-local stream capture and raises the allocator's capture guard
// (nothing may cudaMalloc while capturing); end_capture() instantiates the captured graph, and
// the returned Graph replays it on this stream with one cudaGraphLaunch.
#pragma once
#include <cuda_runtime.h>

#include <memory>

#include "core/allocator.h"
#include "core/stream.h"

namespace gs {

class CudaStream final : public Stream {
 public:
  // `guarded` (optional) is the allocator whose capture guard is raised while capturing.
  explicit CudaStream(int device = 0, Allocator* guarded = nullptr);
  ~CudaStream() override;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  cudaStream_t handle() const { return stream_; }
  int device_index() const { return device_; }

  Device device() const override { return Device::cuda(device_); }
  void begin_capture() override;
  std::unique_ptr<Graph> end_capture() override;
  bool capturing() const override { return capturing_; }
  void synchronize() override;

 private:
  int device_;
  Allocator* guarded_;
  cudaStream_t stream_ = nullptr;
  bool capturing_ = false;
};

// Times a region of one stream's work with a pair of CUDA events (RAII).
class CudaEventTimer {
 public:
  explicit CudaEventTimer(cudaStream_t stream);
  ~CudaEventTimer();
  CudaEventTimer(const CudaEventTimer&) = delete;
  CudaEventTimer& operator=(const CudaEventTimer&) = delete;

  void start();
  void stop();
  float elapsed_ms();  // waits for the stop event

 private:
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

}  // namespace gs
