// PeerSum: what a row-parallel projection needs to sum its ranks' partial outputs itself, at one
// token, instead of leaving them to an all-reduce kernel after it (AddRmsNorm::peer_sum).
//
// The ranks' exchange buffers are the tensor-parallel group's peer memory (the CUDA custom
// all-reduce maps every rank's, distributed/cuda/custom_all_reduce.h). A projection's call c uses
// buffer c % 3 of every rank. Each rank writes its partial row, -0 stored as +0, into region
// `rank` of every peer's buffer; the buffers start filled with -0 (the sentinel), so a reader
// knows an element has arrived when it is no longer -0, with no flag and no barrier (the same
// flagless scheme as the all-reduce's fused add + norm). The last block of the projection to
// finish on a rank reads the peers' regions of its own buffer, sums the row in rank order, adds it
// to the residual and stores the norm; each call refills the buffer of the call before.
#pragma once
#include <cstddef>
#include <cstdint>

namespace gs {

inline constexpr int kPeerSumMaxRanks = 8;

// A rank's bookkeeping of its projection calls, in its own device memory: the blocks of the
// running call that have finished (reset by the last), the calls completed, and the bytes each of
// the three buffers' last call wrote (what the next call refills).
struct PeerSumState {
  uint32_t arrivals;
  uint32_t calls;
  uint32_t used[3];
};

struct PeerSum {
  int world = 0, rank = 0;
  void* buffers[kPeerSumMaxRanks] = {};  // rank r's three exchange buffers as this process maps them
  size_t buffer_bytes = 0;               // bytes of one of the three: world regions of one row
  PeerSumState* state = nullptr;         // this rank's, on its device
};

}  // namespace gs
