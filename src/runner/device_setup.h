// The runner's device: which model source, backend and attention backend a RunnerConfig asks for,
// and the memory queries the memory plan needs.
#pragma once
#include <memory>
#include <string>

#include "attention/attention_backend.h"
#include "attention/mla_attention.h"
#include "distributed/communicator.h"
#include "model/model_factory.h"
#include "ops/backend.h"
#include "runner/runner_config.h"
#include "sampling/sampling_kernels.h"

namespace gs {

// Whether `device` ("cpu", "cuda" or "auto") means the CUDA backend: "auto" does when this build
// has CUDA and a GPU is present. Throws gs::Error for an unknown device.
bool uses_cuda(const std::string& device);
// The GPUs this process sees (CUDA_VISIBLE_DEVICES applies); 0 without CUDA.
int visible_gpus();

// The checkpoint (or dummy preset) the config names, as every runner and the TP driver resolve it:
// dummy weights for --load-format dummy or no model directory.
ModelSource model_source(const RunnerConfig& cfg);

// device "cpu", "cuda" or "auto" (CUDA when this build has it and a GPU is present).
// dtype (RunnerConfig::dtype) picks the CUDA backend's compute dtype: "auto" = the checkpoint's
// torch_dtype (float16 checkpoints run in bfloat16), "bfloat16", "float32"; "float16" is an
// error there. The CPU backend always computes in float32 (the reference).
// Throws gs::Error for an unknown device or dtype and gs::Unsupported for CUDA without CUDA.
// `options` picks the CUDA backend's and attention's kernel variants (the CPU has one of each).
std::unique_ptr<Backend> make_backend(const std::string& device, const std::string& dtype = "auto",
                                      DType checkpoint_dtype = DType::BF16, const KernelOptions& options = {});
std::unique_ptr<AttentionBackend> make_attention(Backend& backend, const AttentionShape& shape,
                                                 const AttentionKernelOptions& options = {});
// The multi-head latent attention backend of the backend's device (DeepSeek-V2/V3); max_context
// (the server's longest, 0 when unknown) sizes the CUDA backend's expanded-form scratch.
std::unique_ptr<AttentionBackend> make_mla_attention_for(Backend& backend, const MlaShape& shape, int max_context);
std::unique_ptr<SamplingKernels> make_sampling_kernels(Backend& backend);

// Joins tensor-parallel group cfg.tp_group as rank cfg.tp_rank of cfg.tensor_parallel_size: the
// shared-memory communicator on the CPU, NCCL (with the custom all-reduce where peers can reach
// each other) on CUDA.
std::unique_ptr<Communicator> make_communicator(Backend& backend, const RunnerConfig& cfg);
// A new group for cfg's device (what rank 0 creates and the other ranks join): a shared-memory
// group name on the CPU, an NCCL unique id on CUDA.
std::string make_tp_group_id(const RunnerConfig& cfg);

// "cpu" or "cuda:0 (NVIDIA H200)".
std::string describe_device(const Backend& backend);

struct DeviceMemory {
  size_t total = 0;  // 0 when unknown (the CPU)
  size_t used = 0;   // by this process's allocator (CPU) or by everything on the GPU
};
DeviceMemory device_memory(Backend& backend);

}  // namespace gs
