// Graph memory (docs/CUDA_GRAPHS.md §8): the sparse piecewise ladder beside dense FULL decode
// keys, how batches pad to it, the estimate the memory plan reserves, and the tuning-cache keys.
#include <gtest/gtest.h>

#include "cudagraph/capture_sizes.h"
#include "cudagraph/cudagraph_dispatcher.h"
#include "cudagraph/graph_memory.h"

namespace gs {
namespace {

using M = CUDAGraphMode;

BatchDescriptor mixed(int n) { return BatchDescriptor::mixed(n); }
BatchDescriptor uni(int n) { return BatchDescriptor::uniform_decode(n, 1); }

TEST(PiecewiseLadder, PowersOfTwoFromEightPlusTheLargest) {
  const std::vector<int> defaults = default_capture_sizes(256);  // 1, 2, 4, 8, ..., 256: 35 sizes
  ASSERT_EQ(defaults.size(), 35u);
  EXPECT_EQ(piecewise_capture_sizes(M::FULL_AND_PIECEWISE, defaults), (std::vector<int>{8, 16, 32, 64, 128, 256}));
  EXPECT_EQ(piecewise_capture_sizes(M::FULL_AND_PIECEWISE, default_capture_sizes(200)),
            (std::vector<int>{8, 16, 32, 64, 128, 200}));
  EXPECT_EQ(piecewise_capture_sizes(M::FULL_AND_PIECEWISE, {1, 2, 4}), (std::vector<int>{4}));
  EXPECT_EQ(piecewise_capture_sizes(M::FULL_AND_PIECEWISE, {}), (std::vector<int>{}));
  // Where piecewise graphs also run decode, or asked for: every size.
  for (M m : {M::PIECEWISE, M::FULL, M::FULL_DECODE_ONLY, M::NONE})
    EXPECT_EQ(piecewise_capture_sizes(m, defaults), defaults) << mode_name(m);
  EXPECT_EQ(piecewise_capture_sizes(M::FULL_AND_PIECEWISE, defaults, /*dense=*/true), defaults);
}

TEST(PiecewiseLadder, DecodeKeepsEverySizeMixedBatchesPadToTheLadder) {
  const std::vector<int> sizes = default_capture_sizes(256);
  CudagraphDispatcher d;
  d.initialize_cudagraph_keys(M::FULL_AND_PIECEWISE, sizes, 1, 128, false,
                              piecewise_capture_sizes(M::FULL_AND_PIECEWISE, sizes));
  EXPECT_EQ(d.keys(M::FULL).size(), 19u);  // 1, 2, 4, 8, ..., 128 (<= max_num_seqs)
  EXPECT_EQ(d.keys(M::PIECEWISE).size(), 6u);
  EXPECT_EQ(d.mixed_capture_sizes(), (std::vector<int>{8, 16, 32, 64, 128, 256}));
  EXPECT_EQ(d.dispatch(uni(9)), std::make_pair(M::FULL, uni(16)));  // decode: the dense ladder
  EXPECT_EQ(d.dispatch(uni(33)), std::make_pair(M::FULL, uni(40)));
  EXPECT_EQ(d.dispatch(mixed(1)), std::make_pair(M::PIECEWISE, mixed(8)));
  EXPECT_EQ(d.dispatch(mixed(9)), std::make_pair(M::PIECEWISE, mixed(16)));
  EXPECT_EQ(d.dispatch(mixed(100)), std::make_pair(M::PIECEWISE, mixed(128)));
  EXPECT_EQ(d.dispatch(mixed(256)), std::make_pair(M::PIECEWISE, mixed(256)));
  EXPECT_EQ(d.dispatch(mixed(257)), std::make_pair(M::NONE, mixed(257)));
  EXPECT_EQ(d.dispatch(uni(130)), std::make_pair(M::PIECEWISE, mixed(256)));  // above max_num_seqs
  // Every key the dispatcher can return has a graph to capture: mixed keys are on the ladder.
  for (const BatchDescriptor& k : d.keys(M::PIECEWISE)) EXPECT_EQ(d.padded_mixed_tokens(k.num_tokens), k.num_tokens);
}

TEST(PiecewiseLadder, ModeFullKeepsOneLadder) {
  CudagraphDispatcher d;
  d.initialize_cudagraph_keys(M::FULL, {1, 2, 4, 8, 16, 24}, 1, 8, false, {8, 24});  // ignored: no PIECEWISE keys
  EXPECT_EQ(d.keys(M::FULL).size(), 6u);
  EXPECT_EQ(d.dispatch(mixed(3)), std::make_pair(M::FULL, mixed(4)));
}

TEST(GraphMemoryEstimate, CountsGraphsAndCoversTheMeasuredCost) {
  EXPECT_EQ(estimate_graph_memory(0, 0, 17).bytes, 0u);  // NONE: nothing to reserve
  // llama3.2-1b, default sizes, FULL_AND_PIECEWISE before the ladder: measured 98-100 MiB on an H200.
  const GraphMemoryEstimate before = estimate_graph_memory(35, 35, 17);
  EXPECT_EQ(before.full_graphs, 35u);
  EXPECT_EQ(before.piecewise_graphs, 595u);
  EXPECT_GT(before.bytes, size_t(100) << 20);
  EXPECT_LT(before.bytes, size_t(400) << 20);  // a reserve, not a land grab
  // smollm2-135m (31 pieces): measured 172 MiB.
  EXPECT_GT(estimate_graph_memory(35, 35, 31).bytes, size_t(172) << 20);
  // More keys or pieces never reserve less.
  EXPECT_GT(estimate_graph_memory(35, 6, 33).bytes, estimate_graph_memory(35, 6, 17).bytes);
  EXPECT_GT(estimate_graph_memory(35, 7, 17).bytes, estimate_graph_memory(35, 6, 17).bytes);
}

}  // namespace
}  // namespace gs
