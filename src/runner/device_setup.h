// The runner's device: which backend and attention backend an EngineConfig asks for, and the
// memory queries the memory plan needs.
#pragma once
#include <memory>
#include <string>

#include "attention/attention_backend.h"
#include "ops/backend.h"

namespace gs {

// device "cpu", "cuda" or "auto" (CUDA when this build has it and a GPU is present).
// Throws gs::Error for an unknown device and gs::Unsupported for CUDA without CUDA.
std::unique_ptr<Backend> make_backend(const std::string& device);
std::unique_ptr<AttentionBackend> make_attention(Backend& backend, const AttentionShape& shape);

// "cpu" or "cuda:0 (NVIDIA H200)".
std::string describe_device(const Backend& backend);

struct DeviceMemory {
  size_t total = 0;  // 0 when unknown (the CPU)
  size_t used = 0;   // by this process's allocator (CPU) or by everything on the GPU
};
DeviceMemory device_memory(Backend& backend);

}  // namespace gs
