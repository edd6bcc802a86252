// CudagraphDispatcher: the keys each mode gets, padding, and which graph (if any) each batch dispatches to.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>

#include "cudagraph/cudagraph_dispatcher.h"

namespace gs {
namespace {

using M = CUDAGraphMode;

BatchDescriptor mixed(int n) { return BatchDescriptor::mixed(n); }
BatchDescriptor uni(int n, int q = 1) { return BatchDescriptor::uniform_decode(n, q); }

std::vector<BatchDescriptor> sorted_keys(const CudagraphDispatcher& d, M m) { return d.keys(m); }

TEST(BatchDescriptor, EqualityHashAndNonUniformForm) {
  BatchDescriptorHash h;
  EXPECT_EQ(uni(8), uni(8));
  EXPECT_EQ(h(uni(8)), h(uni(8)));
  EXPECT_NE(uni(8), mixed(8));
  EXPECT_NE(h(uni(8)), h(mixed(8)));
  EXPECT_EQ(uni(8).num_reqs, 8);
  EXPECT_EQ(uni(8, 2).num_reqs, 4);
  EXPECT_EQ(uni(8, 2).non_uniform(), mixed(8));
  BatchDescriptor lora = mixed(8);
  lora.has_lora = true;
  EXPECT_NE(lora, mixed(8));
  EXPECT_TRUE(lora.non_uniform().has_lora);
}

// Key sets (docs/CUDA_GRAPHS.md §3): sizes {1, 2, 4, 8}, q = 1, max_num_seqs = 4.
TEST(CudagraphDispatcher, KeySetsOfEveryMode) {
  struct Row {
    M mode;
    std::vector<BatchDescriptor> full, piecewise;
  };
  const std::vector<BatchDescriptor> all_mixed = {mixed(8), mixed(4), mixed(2), mixed(1)};
  const std::vector<BatchDescriptor> decode = {uni(4), uni(2), uni(1)};  // s <= q * max_num_seqs
  const Row rows[] = {
      {M::NONE, {}, {}},
      {M::PIECEWISE, {}, all_mixed},
      {M::FULL, all_mixed, {}},
      {M::FULL_DECODE_ONLY, decode, {}},
      {M::FULL_AND_PIECEWISE, decode, all_mixed},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(mode_name(r.mode));
    CudagraphDispatcher d;
    d.initialize_cudagraph_keys(r.mode, {8, 1, 4, 2}, 1, 4);
    EXPECT_EQ(sorted_keys(d, M::FULL), r.full);
    EXPECT_EQ(sorted_keys(d, M::PIECEWISE), r.piecewise);
  }
}

TEST(CudagraphDispatcher, DecodeKeysOfQueryLengthTwo) {
  CudagraphDispatcher d;
  d.initialize_cudagraph_keys(M::FULL_AND_PIECEWISE, {2, 4, 8, 16}, 2, 4);
  // q <= s <= q * max_num_seqs = 8
  EXPECT_EQ(d.keys(M::FULL), (std::vector<BatchDescriptor>{uni(8, 2), uni(4, 2), uni(2, 2)}));
  EXPECT_EQ(d.keys(M::PIECEWISE).size(), 4u);
  EXPECT_EQ(d.dispatch(uni(6, 2)), std::make_pair(M::FULL, uni(8, 2)));
  EXPECT_EQ(d.dispatch(uni(12, 2)), std::make_pair(M::PIECEWISE, mixed(16)));
}

TEST(CudagraphDispatcher, PadsToTheSmallestCaptureSize) {
  CudagraphDispatcher d;
  EXPECT_EQ(d.padded_num_tokens(3), 3);  // no sizes yet
  d.initialize_cudagraph_keys(M::PIECEWISE, {1, 2, 4, 8, 16}, 1, 8);
  EXPECT_EQ(d.padded_num_tokens(1), 1);
  EXPECT_EQ(d.padded_num_tokens(3), 4);
  EXPECT_EQ(d.padded_num_tokens(8), 8);
  EXPECT_EQ(d.padded_num_tokens(9), 16);
  EXPECT_EQ(d.padded_num_tokens(17), 17);
  EXPECT_EQ(d.pad(uni(3)), uni(4));
}

// Dispatch (docs/CUDA_GRAPHS.md §4): sizes {1, 2, 4, 8}, q = 1, max_num_seqs = 4.
TEST(CudagraphDispatcher, DispatchOfEveryMode) {
  struct Row {
    M mode;
    BatchDescriptor in;
    M runtime;
    BatchDescriptor out;
    bool cascade = false;
  };
  const Row rows[] = {
      {M::NONE, uni(3), M::NONE, uni(3)},
      {M::NONE, mixed(3), M::NONE, mixed(3)},
      {M::PIECEWISE, mixed(3), M::PIECEWISE, mixed(4)},
      {M::PIECEWISE, uni(3), M::PIECEWISE, mixed(4)},
      {M::PIECEWISE, mixed(9), M::NONE, mixed(9)},
      {M::FULL, mixed(3), M::FULL, mixed(4)},
      {M::FULL, uni(3), M::FULL, mixed(4)},  // a uniform batch replays the general graph
      {M::FULL, mixed(8), M::FULL, mixed(8)},
      {M::FULL, uni(9), M::NONE, uni(9)},
      {M::FULL_DECODE_ONLY, uni(3), M::FULL, uni(4)},
      {M::FULL_DECODE_ONLY, uni(4), M::FULL, uni(4)},
      {M::FULL_DECODE_ONLY, uni(8), M::NONE, uni(8)},  // 8 > q * max_num_seqs
      {M::FULL_DECODE_ONLY, mixed(3), M::NONE, mixed(3)},
      {M::FULL_AND_PIECEWISE, uni(1), M::FULL, uni(1)},
      {M::FULL_AND_PIECEWISE, uni(3), M::FULL, uni(4)},
      {M::FULL_AND_PIECEWISE, mixed(3), M::PIECEWISE, mixed(4)},
      {M::FULL_AND_PIECEWISE, uni(5), M::PIECEWISE, mixed(8)},
      {M::FULL_AND_PIECEWISE, mixed(9), M::NONE, mixed(9)},
      // Cascade batches: PIECEWISE if available, else NONE, never FULL (CUDA_GRAPHS.md §4).
      {M::NONE, uni(3), M::NONE, uni(3), true},
      {M::PIECEWISE, uni(3), M::PIECEWISE, mixed(4), true},
      {M::PIECEWISE, mixed(3), M::PIECEWISE, mixed(4), true},
      {M::FULL, uni(3), M::NONE, uni(3), true},
      {M::FULL, mixed(3), M::NONE, mixed(3), true},
      {M::FULL_DECODE_ONLY, uni(3), M::NONE, uni(3), true},
      {M::FULL_AND_PIECEWISE, uni(1), M::PIECEWISE, mixed(1), true},
      {M::FULL_AND_PIECEWISE, uni(3), M::PIECEWISE, mixed(4), true},
      {M::FULL_AND_PIECEWISE, mixed(3), M::PIECEWISE, mixed(4), true},
      {M::FULL_AND_PIECEWISE, uni(9), M::NONE, uni(9), true},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(fmt::format("{} {}{}", mode_name(r.mode), r.in.str(), r.cascade ? " cascade" : ""));
    CudagraphDispatcher d;
    d.initialize_cudagraph_keys(r.mode, {1, 2, 4, 8}, 1, 4);
    auto [runtime, out] = d.dispatch(r.in, r.cascade);
    EXPECT_EQ(runtime, r.runtime);
    EXPECT_EQ(out, r.out) << out.str();
  }
}

TEST(CudagraphDispatcher, UninitialisedKeysDispatchToNone) {
  CudagraphDispatcher d;
  EXPECT_FALSE(d.initialized());
  EXPECT_EQ(d.dispatch(uni(4)), std::make_pair(M::NONE, uni(4)));
  EXPECT_EQ(d.dispatch(mixed(2)), std::make_pair(M::NONE, mixed(2)));
}

}  // namespace
}  // namespace gs
