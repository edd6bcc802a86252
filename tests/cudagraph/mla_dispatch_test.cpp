// The MLA attention backend (attention/mla_attention.h) through mode resolution and the
// dispatcher: it declares UNIFORM_SINGLE_TOKEN_DECODE (its prefill form sizes its work by the
// batch's contexts), so uniform one-query decode batches replay FULL graphs and every other batch
// runs PIECEWISE; FULL asked for becomes FULL_AND_PIECEWISE, and spec decode (q = 2) gets no FULL
// graphs at all.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "attention/mla_attention.h"
#include "core/error.h"
#include "cudagraph/cudagraph_dispatcher.h"
#include "cudagraph/mode_resolution.h"
#include "ops/backend.h"

namespace gs {
namespace {

using M = CUDAGraphMode;

MlaShape small_mla() {
  MlaShape s{
      .num_heads = 4, .kv_lora_rank = 32, .qk_nope_head_dim = 16, .qk_rope_head_dim = 8, .v_head_dim = 16, .rope = {}};
  s.scale = 0.2f;
  s.rope.head_dim = 8;
  return s;
}

TEST(MlaDispatch, UniformDecodeRunsFullEveryOtherBatchPiecewise) {
  auto be = make_cpu_backend();
  auto mla = make_mla_attention(*be, small_mla());
  ASSERT_EQ(mla->cudagraph_support(), AttentionCGSupport::UNIFORM_SINGLE_TOKEN_DECODE);
  const BackendCGSupport support = min_cg_support({{mla->name(), mla->cudagraph_support()}});

  const ModeResolution res = resolve_cudagraph_mode(M::FULL_AND_PIECEWISE, support, true, 1, {1, 2, 4, 8});
  ASSERT_EQ(res.mode, M::FULL_AND_PIECEWISE);
  CudagraphDispatcher d;
  d.initialize_cudagraph_keys(res.mode, res.capture_sizes, 1, 8);
  struct Row {
    BatchDescriptor in;
    M runtime;
    BatchDescriptor out;
  };
  const Row rows[] = {
      {BatchDescriptor::uniform_decode(1, 1), M::FULL, BatchDescriptor::uniform_decode(1, 1)},
      {BatchDescriptor::uniform_decode(3, 1), M::FULL, BatchDescriptor::uniform_decode(4, 1)},
      {BatchDescriptor::uniform_decode(8, 1), M::FULL, BatchDescriptor::uniform_decode(8, 1)},
      {BatchDescriptor::mixed(1), M::PIECEWISE, BatchDescriptor::mixed(1)},  // a one-token prefill
      {BatchDescriptor::mixed(5), M::PIECEWISE, BatchDescriptor::mixed(8)},  // prefill + decodes
      {BatchDescriptor::mixed(9), M::NONE, BatchDescriptor::mixed(9)},       // past the largest graph
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.in.str());
    auto [runtime, out] = d.dispatch(r.in, false);
    EXPECT_EQ(mode_name(runtime), mode_name(r.runtime));
    EXPECT_EQ(out, r.out) << out.str();
  }
}

TEST(MlaDispatch, FullIsDowngradedAndSpecDecodeGetsNoFullGraphs) {
  auto be = make_cpu_backend();
  auto mla = make_mla_attention(*be, small_mla());
  const BackendCGSupport support = min_cg_support({{mla->name(), mla->cudagraph_support()}});
  EXPECT_EQ(resolve_cudagraph_mode(M::FULL, support, true, 1, {1, 2, 4}).mode, M::FULL_AND_PIECEWISE);
  const ModeResolution spec = resolve_cudagraph_mode(M::FULL_AND_PIECEWISE, support, true, 2, {2, 4});
  EXPECT_EQ(spec.mode, M::PIECEWISE);
  ASSERT_FALSE(spec.warnings.empty());
  EXPECT_NE(spec.warnings[0].find(mla->name()), std::string::npos) << spec.warnings[0];
}

TEST(MlaDispatch, TheGenericForwardIsRefused) {
  auto be = make_cpu_backend();
  auto mla = make_mla_attention(*be, small_mla());
  AttentionMetadata md;
  EXPECT_THROW(mla->forward(Tensor(), Tensor(), Tensor(), KVCacheLayer{}, md, Tensor(), -1), Error);
}

}  // namespace
}  // namespace gs
