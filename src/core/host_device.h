// GS_HD: a function that both the host and the device compilers build (inline on the host, an
// inlined __host__ __device__ function under nvcc), for arithmetic that the CPU reference and
// the CUDA kernels must compute identically.
#pragma once

#if defined(__CUDACC__)
#define GS_HD __host__ __device__ __forceinline__
#else
#define GS_HD inline
#endif
