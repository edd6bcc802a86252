#include "runner/device_setup.h"

#include "core/error.h"

#ifdef GS_HAVE_CUDA
#include "attention/cuda/cuda_attention.h"
#include "core/cuda/cuda_device.h"
#include "ops/cuda/cuda_backend.h"
#endif

namespace gs {

namespace {
bool want_cuda(const std::string& device) {
  if (device == "cpu") return false;
  if (device == "cuda") return true;
  GS_CHECK(device == "auto", "unknown device '{}': valid devices are auto, cpu, cuda", device);
#ifdef GS_HAVE_CUDA
  return cuda_device_count() > 0;
#else
  return false;
#endif
}
}  // namespace

std::unique_ptr<Backend> make_backend(const std::string& device) {
  if (!want_cuda(device)) return make_cpu_backend();
#ifdef GS_HAVE_CUDA
  GS_CHECK(cuda_device_count() > 0, "device 'cuda' was requested but no CUDA GPU is present");
  return make_cuda_backend(0);
#else
  throw Unsupported("device 'cuda' was requested but this graphserve was built without CUDA; use --device cpu");
#endif
}

std::unique_ptr<AttentionBackend> make_attention(Backend& backend, const AttentionShape& shape) {
#ifdef GS_HAVE_CUDA
  if (backend.device().is_cuda()) return make_cuda_attention(backend, shape);
#endif
  return make_cpu_attention(backend, shape);
}

std::string describe_device(const Backend& backend) {
#ifdef GS_HAVE_CUDA
  if (backend.device().is_cuda())
    return backend.device().str() + " (" + cuda_device_info(backend.device().index).name + ")";
#endif
  return backend.device().str();
}

DeviceMemory device_memory(Backend& backend) {
#ifdef GS_HAVE_CUDA
  if (backend.device().is_cuda()) {
    const int d = backend.device().index;
    const size_t total = cuda_total_memory(d);
    return {total, total - cuda_free_memory(d)};
  }
#endif
  return {0, backend.allocator().bytes_in_use()};
}

}  // namespace gs
