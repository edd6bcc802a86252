// The index workspace of moe_experts (ops/moe.h's moe_index_elems): moe_align writes it from the
// routing, the grouped GEMMs read it. Its layout, for P (token, slot) pairs and E experts:
//   sorted[P]      the pairs, grouped by expert;
//   offsets[E + 1] expert e's pairs are sorted[offsets[e], offsets[e + 1]);
//   chunks[E + 1]  expert e's pairs split into ceil(n_e / chunk) work items of at most `chunk`
//                  pairs, numbered [chunks[e], chunks[e + 1]); chunks[E] items in all;
//   counters[kMoeFoldCounters] the small-batch path's (MoeDirect), which leaves the rest unused.
// A grouped GEMM's grid row blockIdx.y is one item, so the grid is sized by moe_max_items (the
// token count), never by the routing, and the same launch replays in a graph for any routing.
#pragma once
#include <cstdint>

#include "ops/moe.h"

namespace gs::cuda {

struct MoeIndex {
  int32_t *sorted, *offsets, *chunks, *counters;
  __host__ __device__ MoeIndex(int32_t* p, int P, int E)
      : sorted(p), offsets(p + P), chunks(p + P + E + 1), counters(p + P + 2 * (E + 1)) {}
};

// Work items of at most `chunk` pairs that P pairs over E experts can make:
// sum_e ceil(n_e / chunk) <= ceil(P / chunk) + min(E, P).
inline int moe_max_items(int P, int E, int chunk) { return (P + chunk - 1) / chunk + (P < E ? P : E); }

// Shared memory moe_block_item stages: chunks and offsets, E + 1 ints each.
constexpr int kMoeStageInts = 2 * (kMaxMoeExperts + 1);

// This CTA's work item (blockIdx.y): its expert e and pairs [begin, end); false past the last
// item. Every thread of the block calls it, after pdl_wait(); `stage` holds kMoeStageInts. Both
// arrays are read in one pass, so the item costs one round trip to global memory.
__device__ __forceinline__ bool moe_block_item(const MoeIndex& ix, int E, int chunk, int* stage, int& e, int& begin,
                                               int& end) {
  int* const offsets = stage + E + 1;
  for (int i = int(threadIdx.x); i <= E; i += int(blockDim.x)) stage[i] = ix.chunks[i], offsets[i] = ix.offsets[i];
  __syncthreads();
  const int y = int(blockIdx.y);
  if (y >= stage[E]) return false;
  int lo = 0, hi = E;  // the last expert whose first item is <= y: stage[lo] <= y < stage[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (stage[mid] <= y)
      lo = mid;
    else
      hi = mid;
  }
  e = lo;
  begin = offsets[e] + (y - stage[e]) * chunk;
  end = min(begin + chunk, offsets[e + 1]);
  return true;
}

}  // namespace gs::cuda
