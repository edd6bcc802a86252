// CustomAllReduce: the one-shot and two-shot all-reduce over NVLink peer memory of the ranks of
// one host (vLLM's "custom all-reduce" idea, written here from scratch), and the column gather of
// vocab-parallel logits over the same buffers.
//
// Each rank cudaMallocs one buffer (a signal area, two halves of custom_max_bytes, three Lamport
// buffers for the flagless fused all-reduce + add + norm, then three for the one-token projections
// that sum their ranks' partials themselves, ops/peer_sum.h) before any capture, and maps
// every peer's buffer through CUDA IPC handles exchanged at start-up. A call is one kernel
// (captured into graphs like any): each block copies its share of the input into the rank's
// buffer, meets the same block of every peer at a barrier, then sums every rank's buffer in rank
// order 0..N-1 (f32 accumulation) into the output (one-shot), or sums its slice, meets them again
// and gathers the slices (two-shot). Consecutive calls alternate between the two halves, so no
// rank overwrites data a peer may still read and no closing barrier is needed. The barrier flags
// carry call numbers: a per-block counter in the signal area that the kernel itself advances, so
// a captured graph replays correctly any number of times. Every rank must issue the same
// all-reduces in the same order (the communicator contract). The all-reduce of o_proj / down
// fused with the residual add + RMSNorm after it (decode sizes) needs no barrier: the peers'
// data is its own flag (custom_ar::launch_lamport_add_rms_norm), one NVLink crossing a call.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "distributed/all_reduce_policy.h"
#include "ops/peer_sum.h"

namespace gs {

namespace custom_ar {
struct PeerTable;    // custom_all_reduce_kernels.h
struct TraceRecord;  // custom_all_reduce_kernels.h
}  // namespace custom_ar

// Every rank's `bytes` bytes, concatenated in rank order (a host-side all-gather of the group).
using HostAllGather = std::function<std::vector<char>(const void* mine, size_t bytes)>;

class CustomAllReduce {
 public:
  // Collective: every rank of the group calls it with the same world, dtype and `disabled`.
  // Returns nullptr on every rank (and *why_not says why) unless every rank is on the same host
  // and maps every peer's buffer; all ranks reach the same answer. lamport: the fused add + norm
  // kernel is the flagless one (else the one with a barrier between ranks).
  static std::unique_ptr<CustomAllReduce> create(int rank, int world, int device, DType activations, bool disabled,
                                                 bool lamport, const HostAllGather& all_gather, std::string* why_not);
  ~CustomAllReduce();
  CustomAllReduce(const CustomAllReduce&) = delete;
  CustomAllReduce& operator=(const CustomAllReduce&) = delete;

  const AllReducePolicy& policy() const { return policy_; }
  // In place on `stream`: t = the sum of every rank's t. algo OneShot or TwoShot; t bf16 or f32,
  // contiguous, 16-byte aligned, nbytes a multiple of kCustomAllReduceAlign and at most
  // policy().custom_max_bytes.
  void all_reduce(const Tensor& t, AllReduceAlgo algo, cudaStream_t stream);
  // Whether all_reduce_add_rms_norm takes these tensors: fuse_all_reduce_add_rms_norm's sizes,
  // x, w and out of one dtype (bf16 or f32), residual f32, every one 16-byte aligned,
  // x / residual / out [rows, hidden] and w [hidden].
  bool fits_add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& w, const Tensor& out) const;
  // On `stream`, in one kernel: x = the one-shot sum of every rank's x; residual += x;
  // out = rms_norm(residual) * w (Communicator::all_reduce_add_rms_norm; x is left as it was
  // unless out aliases it). Throws gs::Error unless fits_add_rms_norm. x in the activations'
  // dtype runs the flagless (Lamport) kernel: bit for bit the all-reduce then add_rms_norm, but
  // for the sign of a zero where a rank's partial is exactly -0; the lamport option off
  // (create), or x in the other dtype, runs the kernel with the barrier, bit for bit the two ops.
  void all_reduce_add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& w, float eps, const Tensor& out,
                               cudaStream_t stream);
  // Communicator::gather_columns of local [n, c] into out [n, W] on `stream`, as check_gather_columns
  // accepts them (the communicator checks first), in the custom kernel's calls of custom_gather_rows
  // rows; false, with nothing enqueued, where the elements are not 2 or 4 bytes, local is not
  // 16-byte aligned, or the policy leaves that gather to NCCL.
  bool gather_columns(const Tensor& local, const Tensor& out, cudaStream_t stream);
  // The exchange a one-token projection sums its ranks' partials over (Communicator::peer_sum):
  // three more sentinel-filled buffers after the Lamport ones, with their own call numbering in
  // the signal area. nullopt unless the flagless kernel is on, rows is 1, dt the activations'
  // dtype and hidden a multiple of 8 up to kFusedNormMaxHidden.
  std::optional<PeerSum> peer_sum(int64_t rows, int64_t hidden, DType dt) const;

 private:
  CustomAllReduce(int rank, int world, AllReducePolicy policy);
  // Every rank's mapped buffer, as the kernels take it.
  custom_ar::PeerTable peer_table() const;
  // Bytes of one of the three Lamport buffers: every rank's region of a fused message.
  size_t lamport_bytes() const;
  // Bytes of one of the three peer_sum buffers: every rank's row of kFusedNormMaxHidden elements.
  size_t peer_sum_bytes() const;

  // The diagnosis switch, read at construction: GS_AR_TRACE=<path> records every call's timeline
  // on the device (custom_ar::TraceRecord) and writes it to <path>.rank<r> (one line a call:
  // call kind rows t0..t4 in ns) when this object is destroyed. It changes no sum.
  void start_diagnosis();
  void write_trace() const;

  int rank_, world_;
  AllReducePolicy policy_;
  custom_ar::TraceRecord* trace_ = nullptr;  // device ring (GS_AR_TRACE)
  std::string trace_path_;
  DType lamport_dtype_ = DType::BF16;  // the sentinel the Lamport buffers hold
  bool lamport_ = true;
  void* own_ = nullptr;        // this rank's buffer (cudaMalloc)
  std::vector<void*> peers_;   // every rank's buffer as this process sees it (own_ at rank_)
  std::vector<void*> opened_;  // the IPC mappings to close
};

}  // namespace gs
