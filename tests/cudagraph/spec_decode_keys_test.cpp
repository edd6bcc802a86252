// Graph-support honesty for speculative decoding (docs/CUDA_GRAPHS.md §7): verification batches
// are uniform with q = 1 + k. A backend declaring only UNIFORM_SINGLE_TOKEN_DECODE must not get
// FULL graphs for them: resolution downgrades the mode and the dispatcher holds no q > 1 keys,
// so verification runs piecewise; UNIFORM_BATCH (or ALWAYS) keeps the (num_reqs * q, q) keys.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "cudagraph/cudagraph_dispatcher.h"
#include "cudagraph/mode_resolution.h"

namespace gs {
namespace {

using M = CUDAGraphMode;
using S = AttentionCGSupport;

CudagraphDispatcher dispatcher_for(S support, M requested, int q, int max_num_seqs, ModeResolution* res) {
  *res = resolve_cudagraph_mode(requested, {"single-token-attn", support}, /*piecewise=*/true, q, {1, 2, 4, 8, 16, 32});
  CudagraphDispatcher d;
  d.initialize_cudagraph_keys(res->mode, res->capture_sizes, q, max_num_seqs);
  return d;
}

TEST(SpecDecodeKeys, SingleTokenDecodeBackendLosesVerificationGraphs) {
  for (int k = 1; k <= 8; ++k) {
    const int q = 1 + k;
    SCOPED_TRACE(fmt::format("k = {}", k));
    for (M requested : {M::FULL_AND_PIECEWISE, M::FULL_DECODE_ONLY, M::FULL}) {
      ModeResolution res;
      const CudagraphDispatcher d = dispatcher_for(S::UNIFORM_SINGLE_TOKEN_DECODE, requested, q, 8, &res);
      EXPECT_EQ(mode_name(res.mode), mode_name(M::PIECEWISE)) << mode_name(requested);
      ASSERT_FALSE(res.warnings.empty());
      EXPECT_NE(res.warnings.back().find("UNIFORM_SINGLE_TOKEN_DECODE"), std::string::npos) << res.warnings.back();
      EXPECT_TRUE(d.keys(M::FULL).empty());
      for (int reqs : {1, 3, 8}) {  // a verification batch within the capture sizes runs piecewise
        if (reqs * q > 32) continue;
        const auto [mode, desc] = d.dispatch(BatchDescriptor::uniform_decode(reqs * q, q));
        EXPECT_EQ(mode_name(mode), mode_name(M::PIECEWISE));
        EXPECT_FALSE(desc.uniform);
      }
    }
  }
}

TEST(SpecDecodeKeys, UniformBatchBackendKeepsVerificationGraphs) {
  for (S support : {S::UNIFORM_BATCH, S::ALWAYS}) {
    ModeResolution res;
    const CudagraphDispatcher d = dispatcher_for(support, M::FULL_AND_PIECEWISE, 5, 8, &res);
    EXPECT_EQ(mode_name(res.mode), mode_name(M::FULL_AND_PIECEWISE));
    EXPECT_EQ(res.capture_sizes, (std::vector<int>{5, 10, 20}));  // multiples of q = 5 within the largest size
    for (int reqs : {1, 2, 3, 4}) {
      const auto [mode, desc] = d.dispatch(BatchDescriptor::uniform_decode(reqs * 5, 5));
      EXPECT_EQ(mode_name(mode), mode_name(M::FULL)) << reqs;
      EXPECT_TRUE(desc.uniform);
      EXPECT_EQ(desc.uniform_query_len, 5);
      EXPECT_EQ(desc.num_tokens % 5, 0);
      EXPECT_GE(desc.num_reqs, reqs);
    }
    // A batch with a request lacking proposals is mixed: piecewise.
    EXPECT_EQ(mode_name(d.dispatch(BatchDescriptor::mixed(9)).first), mode_name(M::PIECEWISE));
  }
}

}  // namespace
}  // namespace gs
