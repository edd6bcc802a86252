// The device memory the captured graphs of a key set will hold, estimated before capture so the
// memory plan can reserve it ahead of the KV cache (docs/CUDA_GRAPHS.md §8).
#pragma once
#include <cstddef>

namespace gs {

struct GraphMemoryEstimate {
  size_t full_graphs = 0;       // one per FULL key
  size_t piecewise_graphs = 0;  // pieces per PIECEWISE key
  size_t bytes = 0;             // what to reserve, margins included
};

// An instantiated graph costs a fixed amount of device memory plus a little per node (docs/
// CUDA_GRAPHS.md §8); a piece holds a few nodes, a FULL graph a few per piece. The estimate takes
// 1.5x the per-graph and per-piece costs, plus a fixed 64 MiB for what the first launches of the
// warm-up and the captures load lazily (kernel modules, library handles).
GraphMemoryEstimate estimate_graph_memory(size_t full_keys, size_t piecewise_keys, int num_pieces);

}  // namespace gs
