// The all-reduce benchmark's per-rank part: latency per message size of NCCL and of the custom
// one-shot / two-shot all-reduce, each timed inside a captured CUDA graph (as the model's graphs
// run them), with every custom result checked against the exact sum. `graphserve bench
// all-reduce` starts one process per GPU and prints rank 0's tables (with the fused all-reduce +
// residual add + RMSNorm against the two ops it replaces).
#pragma once
#include <cstddef>
#include <vector>

#include "distributed/all_reduce_policy.h"
#include "distributed/communicator.h"

namespace gs {

struct AllReduceTiming {
  size_t bytes = 0;
  AllReduceAlgo algo = AllReduceAlgo::Nccl;
  double us = 0;           // one all-reduce, averaged over the replays
  double bus_gbs = 0;      // bus bandwidth: bytes * 2 (N-1) / N / time
  double max_abs_err = 0;  // vs the exact sum (the inputs sum exactly in bf16)
};

// Collective (every rank, same sizes): bf16 messages of each size in `sizes` (bytes, multiples
// of 16), `calls` all-reduces per graph, `replays` timed replays. comm from make_nccl_communicator.
std::vector<AllReduceTiming> bench_all_reduce(Communicator& comm, Backend& backend, const std::vector<size_t>& sizes,
                                              int calls = 20, int replays = 20);

// The all-reduce of o_proj / down fused with the residual add + RMSNorm after it, vs the two ops
// (the one-shot all-reduce, then the backend's add_rms_norm), for bf16 x [rows, hidden] and an
// f32 residual.
struct AllReduceNormTiming {
  int rows = 0;
  bool fused_available = false;  // the custom path takes this size (else fused_us is the two ops too)
  double fused_us = 0, unfused_us = 0;
  double max_abs_diff = 0;  // fused vs the two ops, over the residual and out (0: bit for bit)
};
// Collective, like bench_all_reduce: one row per entry of `rows`.
std::vector<AllReduceNormTiming> bench_all_reduce_add_rms_norm(Communicator& comm, Backend& backend,
                                                               const std::vector<int>& rows, int hidden, int calls = 20,
                                                               int replays = 20);

}  // namespace gs
