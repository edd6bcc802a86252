// Implements sampling/cuda/cuda_sampling.h.
#include "sampling/cuda/cuda_sampling.h"

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "core/error.h"
#include "sampling/cuda/sampling_launch.h"

namespace gs {
namespace {

class CudaSamplingKernels final : public SamplingKernels {
 public:
  explicit CudaSamplingKernels(cudaStream_t s) : stream_(s) {}
  void sample(const SampleArgs& a) override { GS_CUDA_CHECK(cuda::sample(a, stream_)); }
  void reset_slot(const SlotArgs& a) override { GS_CUDA_CHECK(cuda::reset_slot(a, stream_)); }

 private:
  cudaStream_t stream_;
};

}  // namespace

std::unique_ptr<SamplingKernels> make_cuda_sampling_kernels(Backend& backend) {
  auto* s = dynamic_cast<CudaStream*>(&backend.stream());
  GS_CHECK(s != nullptr, "the CUDA sampling kernels need the CUDA backend, got '{}'", backend.name());
  return std::make_unique<CudaSamplingKernels>(s->handle());
}

}  // namespace gs
