// Programmatic dependent launch (PDL, Hopper): kernels of the decode chain are launched with
// cudaLaunchAttributeProgrammaticStreamSerialization, so a kernel's CTAs may start while the
// previous kernel's tail still runs (its launch and prologue, e.g. a GEMV's first weight loads,
// overlap that tail); stream capture keeps these as programmatic graph edges. The contract, for
// every kernel launched through launch_pdl:
//   - it calls pdl_wait() in every thread before it reads anything an earlier kernel wrote or
//     writes anything (only reads of constant data, such as weights, may come before);
//   - it may call pdl_trigger() to let the next kernel start early, after its own pdl_wait() or,
//     where it says so, before it. pdl_wait() waits for the whole previous grid to finish and its
//     memory to be visible, and that grid finished only after its own wait returned, so every
//     earlier kernel has finished too: where the trigger sits never changes what a kernel reads
//     after its wait.
//   - a kernel that reads, before its wait, something an earlier kernel of the step wrote (the MoE
//     down GEMM reads the routing's expert ids) relies on its predecessor triggering only after
//     that predecessor's own wait; such a predecessor says so where it triggers.
#pragma once
#include <cuda_runtime.h>

#include <utility>

namespace gs::cuda {

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

// kernel<<<grid, block, smem, s>>>(args...) with the PDL attribute, in thread-block clusters of
// cluster_x blocks along x where cluster_x > 1; returns the launch's error.
template <typename... Params, typename... Args>
cudaError_t launch_pdl_cluster(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                               unsigned cluster_x, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = cluster_x;
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = cluster_x > 1 ? 2 : 1;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// kernel<<<grid, block, smem, s>>>(args...) with the PDL attribute; returns the launch's error.
template <typename... Params, typename... Args>
cudaError_t launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, Args&&... args) {
  return launch_pdl_cluster(kernel, grid, block, smem, s, 1u, std::forward<Args>(args)...);
}

}  // namespace gs::cuda
