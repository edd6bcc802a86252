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

// From the H200 measurements of docs/CUDA_GRAPHS.md §8: an instantiated graph costs ~110 KiB plus
// ~3 KiB per node; a piece holds ~8 nodes (~135 KiB), a FULL graph ~8 per piece (~550 KiB at 17
// pieces). The estimate takes 1.5x those, plus a fixed 64 MiB for what the first launches of the
// warm-up and the captures load lazily (kernel modules, library handles).
GraphMemoryEstimate estimate_graph_memory(size_t full_keys, size_t piecewise_keys, int num_pieces);

}  // namespace gs
