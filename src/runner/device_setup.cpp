// Implements runner/device_setup.h.
#include "runner/device_setup.h"

#include "core/error.h"
#include "core/logging.h"

#ifdef GS_HAVE_CUDA
#include "attention/cuda/cuda_attention.h"
#include "attention/cuda/cuda_mla_attention.h"
#include "core/cuda/cuda_device.h"
#include "distributed/cuda/nccl_communicator.h"
#include "ops/cuda/cuda_backend.h"
#include "sampling/cuda/cuda_sampling.h"
#endif

namespace gs {

ModelSource model_source(const RunnerConfig& cfg) {
  ModelSource src;
  src.dir = cfg.model;
  src.dummy = cfg.load_format == "dummy" || cfg.model.empty();
  src.quantization = cfg.quantization;
  src.preset = cfg.preset;
  src.seed = cfg.seed;
  return src;
}

bool uses_cuda(const std::string& device) {
  if (device == "cpu") return false;
  if (device == "cuda") return true;
  GS_CHECK(device == "auto", "unknown device '{}': valid devices are auto, cpu, cuda", device);
#ifdef GS_HAVE_CUDA
  return cuda_device_count() > 0;
#else
  return false;
#endif
}

int visible_gpus() {
#ifdef GS_HAVE_CUDA
  return cuda_device_count();
#else
  return 0;
#endif
}

namespace {

#ifdef GS_HAVE_CUDA
// The CUDA compute dtype for RunnerConfig::dtype and the checkpoint's torch_dtype.
DType cuda_dtype(const std::string& dtype, DType checkpoint) {
  if (dtype == "float32") return DType::F32;
  if (dtype == "bfloat16") return DType::BF16;
  GS_CHECK(dtype != "float16", "--dtype float16 is not supported on the CUDA backend; use bfloat16 or float32");
  GS_CHECK(dtype == "auto", "unknown dtype '{}': valid dtypes are auto, bfloat16, float32 (float16 on no backend)",
           dtype);
  if (checkpoint == DType::F32) return DType::F32;
  if (checkpoint == DType::F16) spdlog::info("dtype auto: the float16 checkpoint runs in bfloat16 on the GPU");
  return DType::BF16;
}
#endif
}  // namespace

std::unique_ptr<Backend> make_backend(const std::string& device, const std::string& dtype, DType checkpoint_dtype,
                                      const KernelOptions& options) {
  if (!uses_cuda(device)) return make_cpu_backend();
#ifdef GS_HAVE_CUDA
  GS_CHECK(cuda_device_count() > 0, "device 'cuda' was requested but no CUDA GPU is present");
  const DType dt = cuda_dtype(dtype, checkpoint_dtype);
  spdlog::info("CUDA compute dtype: {} (--dtype {})", dtype_name(dt), dtype);
  return make_cuda_backend(0, dt, options);
#else
  throw Unsupported("device 'cuda' was requested but this graphserve was built without CUDA; use --device cpu");
#endif
}

std::unique_ptr<AttentionBackend> make_attention(Backend& backend, const AttentionShape& shape,
                                                 const AttentionKernelOptions& options) {
#ifdef GS_HAVE_CUDA
  if (backend.device().is_cuda()) return make_cuda_attention(backend, shape, options);
#else
  (void)options;
#endif
  return make_cpu_attention(backend, shape);
}

std::unique_ptr<AttentionBackend> make_mla_attention_for(Backend& backend, const MlaShape& shape, int max_context) {
#ifdef GS_HAVE_CUDA
  if (backend.device().is_cuda()) return make_cuda_mla_attention(backend, shape, max_context);
#else
  (void)max_context;
#endif
  return make_mla_attention(backend, shape);
}

std::unique_ptr<SamplingKernels> make_sampling_kernels(Backend& backend) {
#ifdef GS_HAVE_CUDA
  if (backend.device().is_cuda()) return make_cuda_sampling_kernels(backend);
#endif
  return make_cpu_sampling_kernels(backend);
}

std::unique_ptr<Communicator> make_communicator(Backend& backend, const RunnerConfig& cfg) {
  GS_CHECK(!cfg.tp_group.empty(),
           "tensor_parallel_size {} runs one worker process per rank (graphserve generate / serve / bench start "
           "them); this runner was given no group to join",
           cfg.tensor_parallel_size);
#ifdef GS_HAVE_CUDA
  if (backend.device().is_cuda())
    return make_nccl_communicator(cfg.tp_group, cfg.tp_rank, cfg.tensor_parallel_size, backend,
                                  cfg.disable_custom_all_reduce, cfg.kernel_options.all_reduce);
#endif
  return make_shm_communicator(cfg.tp_group, cfg.tp_rank, cfg.tensor_parallel_size, backend);
}

std::string make_tp_group_id(const RunnerConfig& cfg) {
#ifdef GS_HAVE_CUDA
  if (uses_cuda(cfg.device)) return make_nccl_group_id();
#endif
  (void)cfg;
  return make_shm_group_name();
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
