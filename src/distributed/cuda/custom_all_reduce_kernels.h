// The custom all-reduce's device side (distributed/cuda/custom_all_reduce.h): the signal area at
// the head of every rank's buffer, the table of mapped peer buffers, and the kernel launch.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "distributed/all_reduce_policy.h"

namespace gs::custom_ar {

inline constexpr int kMaxBlocks = 36;  // blocks of one call: enough to saturate NVLink, all co-resident
inline constexpr int kRanks = kCustomAllReduceMaxRanks;

// The head of every rank's buffer. flags[phase][block][r]: the call number rank r reached at
// that barrier (start; mid: two-shot's between its phases) of that block (written by rank r into
// this rank's area); counter[block]: the calls this block has completed on this rank.
struct Signal {
  uint32_t flags[2][kMaxBlocks][kRanks];
  uint32_t counter[kMaxBlocks];
};
inline constexpr size_t kSignalBytes = (sizeof(Signal) + 255) / 256 * 256;

// Every rank's buffer as the calling process maps it: its signal area, then its data in two
// halves of half_packs 16-byte packs each (consecutive calls alternate between them).
struct PeerTable {
  Signal* sig[kRanks];
  void* data[kRanks];
  size_t half_packs;
};

// out = the sum over the ranks of each rank's `in` (packs 16-byte packs of bf16 or f32, at most
// half_packs; out may be in), on `stream`, with the one-shot or two-shot kernel, which first
// copies `in` into this rank's buffer; world 2, 4 or 8. Returns the launch's error
// (cudaErrorInvalidValue for another world, algorithm or size).
cudaError_t launch_all_reduce(AllReduceAlgo algo, bool bf16, int world, const PeerTable& table, int rank,
                              const void* in, void* out, size_t packs, cudaStream_t stream);

// The one-shot all-reduce of x [rows, hidden] (bf16 or f32) fused with the residual add and
// RMSNorm after it, in one kernel: sum = the rank-order f32 sum of every rank's x rounded to x's
// dtype (as launch_all_reduce writes it); residual (f32) += sum; out = rms_norm(residual) * w
// (w and out in x's dtype; out may alias x). Block b writes rows b, b + kMaxBlocks, ... of x
// into every rank's buffer (region `rank`), then reduces them from its own buffer, with the
// thread layout and arithmetic of the CUDA backend's add_rms_norm, so the result equals
// launch_all_reduce then Backend::add_rms_norm bit for bit. Launched with programmatic dependent
// launch (ops/cuda/launch.cuh). world * rows * hidden elements must fit half_packs; hidden % 8
// == 0, hidden <= kFusedNormMaxHidden; every pointer 16-byte aligned.
cudaError_t launch_all_reduce_add_rms_norm(bool bf16, int world, const PeerTable& table, int rank, const void* x,
                                           float* residual, const void* w, float eps, void* out, int rows, int hidden,
                                           cudaStream_t stream);

}  // namespace gs::custom_ar
