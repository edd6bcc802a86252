// CUDA error checks that throw gs::Error naming the failed call.
#pragma once
#include <cuda_runtime.h>

#include "core/error.h"

#define GS_CUDA_CHECK(expr)                                                                               \
  do {                                                                                                    \
    cudaError_t gs_err_ = (expr);                                                                         \
    if (gs_err_ != cudaSuccess)                                                                           \
      ::gs::fail("CUDA error in {} ({}:{}): {}", #expr, __FILE__, __LINE__, cudaGetErrorString(gs_err_)); \
  } while (0)
