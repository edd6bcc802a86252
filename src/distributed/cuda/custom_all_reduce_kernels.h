// The custom all-reduce's device side (distributed/cuda/custom_all_reduce.h): the signal area at
// the head of every rank's buffer, the table of mapped peer buffers, and the kernel launch.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "distributed/all_reduce_policy.h"
#include "ops/peer_sum.h"

namespace gs::custom_ar {

inline constexpr int kMaxBlocks = 36;  // blocks of one call: enough to saturate NVLink, all co-resident
inline constexpr int kRanks = kCustomAllReduceMaxRanks;

// The head of every rank's buffer. flags[phase][block][r]: the call number rank r reached at
// that barrier (start; mid: two-shot's between its phases) of that block (written by rank r into
// this rank's area); counter[block]: the calls this block has completed on this rank.
// lamport_counter[block]: the flagless fused calls this block has completed (their own numbering:
// call c uses Lamport buffer c % 3); lamport_used[i]: the elements (every rank's region) the last
// call on buffer i wrote; trace_next: the next trace record's index (GS_AR_TRACE); peer_sum: the
// projections' own exchange (ops/peer_sum.h, CustomAllReduce::peer_sum).
struct Signal {
  uint32_t flags[2][kMaxBlocks][kRanks];
  uint32_t counter[kMaxBlocks];
  uint32_t lamport_counter[kMaxBlocks];
  uint32_t lamport_used[3];
  uint32_t trace_next;
  PeerSumState peer_sum;
};
inline constexpr size_t kSignalBytes = (sizeof(Signal) + 255) / 256 * 256;

// One call's timeline on one rank (GS_AR_TRACE, a diagnosis switch): the %globaltimer (ns) at
// block 0's entry, after its pdl_wait() (the previous kernel done), on reaching the barrier (its
// data pushed), on passing it (every peer arrived) and at its end; kind 0 the plain one-shot,
// 1 the fused add + norm with the barrier, 2 the flagless one (Lamport: t[2] after the push, t[3]
// when block 0 has its first row summed and normed). A ring of kTraceCalls records in call order.
struct TraceRecord {
  uint32_t call, kind, rows, pad;
  uint64_t t[5];
  uint64_t pad2;
};
inline constexpr uint32_t kTraceCalls = 1u << 16;

// Every rank's buffer as the calling process maps it: its signal area, then its data in two
// halves of half_packs 16-byte packs each (consecutive calls alternate between them), then the
// three Lamport buffers of lamport_bytes each (the flagless fused kernel).
struct PeerTable {
  Signal* sig[kRanks];
  void* data[kRanks];
  size_t half_packs;
  void* lamport[kRanks];
  size_t lamport_bytes;
  TraceRecord* trace;  // null unless GS_AR_TRACE
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

// The same sum, add and norm without a barrier (Lamport-style): each Lamport buffer starts filled
// with the sentinel, negative zero of the element type (lamport_fill). Block b writes rows b,
// b + kMaxBlocks, ... of x, with -0 turned into +0, into region `rank` of every peer's buffer of
// this call (call c of this kernel uses buffer c % 3), then reads the peers' regions of its own
// buffer until no element is the sentinel: the data is the flag, one NVLink crossing a call.
// Each call refills the buffer of the call before (only this rank reads it, and no peer writes it
// again before this rank's next call has started). The sums, residual and output equal
// launch_all_reduce_add_rms_norm's bit for bit unless a rank's partial holds an exact -0 (then a
// zero's sign may differ). Same limits as launch_all_reduce_add_rms_norm, with world * rows *
// hidden elements fitting lamport_bytes; x in the dtype the buffers were filled for.
cudaError_t launch_lamport_add_rms_norm(bool bf16, int world, const PeerTable& table, int rank, const void* x,
                                        float* residual, const void* w, float eps, void* out, int rows, int hidden,
                                        cudaStream_t stream);
// The column gather of a vocab-parallel lm_head's logits (Communicator::gather_columns), one
// call: every rank's `local` [rows, row_bytes] goes to bytes [r row_bytes, (r + 1) row_bytes) of
// each row of every rank's out [rows, width_bytes] (rank r's block; cut at width_bytes). A block
// pushes its share of local into every peer's buffer (region `rank`, as the fused kernel) and its
// own columns of out, meets the same block of every peer, then copies the peers' regions of that
// share into out: one NVLink crossing for the data, one for the flag. Launched with programmatic
// dependent launch. row_bytes a multiple of 16, width_bytes of 2 and at most world row_bytes,
// world * rows * row_bytes at most half_packs 16-byte packs, local 16-byte aligned.
cudaError_t launch_gather_columns(int world, const PeerTable& table, int rank, const void* local, void* out, int rows,
                                  size_t row_bytes, size_t width_bytes, cudaStream_t stream);
// Fills `bytes` (a multiple of 16) at p with the Lamport sentinel of bf16 or f32, on `stream`.
cudaError_t lamport_fill(void* p, size_t bytes, bool bf16, cudaStream_t stream);

}  // namespace gs::custom_ar
