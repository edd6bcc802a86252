// Implements cudagraph/graph_memory.h.
#include "cudagraph/graph_memory.h"

namespace gs {

namespace {
constexpr size_t kKiB = 1024;
// 1.5x the costs of docs/CUDA_GRAPHS.md §8: a piecewise graph, a FULL graph's share per piece,
// and a graph's fixed part.
constexpr size_t kPieceGraphBytes = 200 * kKiB;
constexpr size_t kFullGraphBytesPerPiece = 48 * kKiB;
constexpr size_t kFullGraphFixedBytes = 160 * kKiB;
constexpr size_t kLazyLoadSlackBytes = size_t(64) << 20;
}  // namespace

GraphMemoryEstimate estimate_graph_memory(size_t full_keys, size_t piecewise_keys, int num_pieces) {
  GraphMemoryEstimate e;
  const size_t pieces = num_pieces > 0 ? size_t(num_pieces) : 1;
  e.full_graphs = full_keys;
  e.piecewise_graphs = piecewise_keys * pieces;
  e.bytes =
      e.piecewise_graphs * kPieceGraphBytes + e.full_graphs * (kFullGraphFixedBytes + pieces * kFullGraphBytesPerPiece);
  if (e.bytes > 0) e.bytes += kLazyLoadSlackBytes;
  return e;
}

}  // namespace gs
