// The CUDA backend's DecodeStep (ops/decode_step.h): the persistent decode kernel
// (persistent_decode.h) over a model's weights, with its device-side layer table, split
// workspace and barrier words.
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "ops/backend.h"
#include "ops/decode_step.h"
#include "ops/kernel_options.h"

namespace gs::cuda_backend {

// Null, with the reason in *why, where `m` is outside what the kernel covers (shapes, dtype) or
// options.persistent_max_tokens is 0. inv_freq: the backend's table for m.rope; `stream` the
// backend's, where run() launches.
std::unique_ptr<DecodeStep> make_decode_step(const DecodeStepModel& m, const Tensor& inv_freq,
                                             const DecodeKernelOptions& options, Backend& backend, cudaStream_t stream,
                                             std::string* why);

}  // namespace gs::cuda_backend
