// CUDAGraphWrapper on the CPU stream, around a fake two-piece model over persistent buffers.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/cpu_stream.h"
#include "core/error.h"
#include "core/tensor.h"
#include "cudagraph/cudagraph_wrapper.h"
#include "cudagraph/forward_context.h"

namespace gs {
namespace {

using M = CUDAGraphMode;

// forward: piece 0 (h = x + 1), attention (h *= 2), piece 1 (y = h + 10), over `n` rows.
// Kernels are launched on the stream with the row count of the current batch baked in.
struct FakeModel {
  CpuAllocator alloc;
  CpuStream stream{&alloc};
  Tensor x = Tensor::empty({16}, DType::F32, alloc);
  Tensor h = Tensor::empty({16}, DType::F32, alloc);
  Tensor y = Tensor::empty({16}, DType::F32, alloc);
  int n = 0;                   // rows of the current batch (host side)
  int attention_launches = 0;  // host-side calls: eager attention is launched every step

  void piece(int i) {
    float *px = x.data_as<float>(), *ph = h.data_as<float>(), *py = y.data_as<float>();
    const int rows = n;
    if (i == 0)
      stream.launch([=] {
        for (int r = 0; r < rows; ++r) ph[r] = px[r] + 1;
      });
    else
      stream.launch([=] {
        for (int r = 0; r < rows; ++r) py[r] = ph[r] + 10;
      });
  }
  void attention() {
    ++attention_launches;
    float* ph = h.data_as<float>();
    const int rows = n;
    stream.launch([=] {
      for (int r = 0; r < rows; ++r) ph[r] *= 2;
    });
  }
  void set_input(int rows, float base) {
    n = rows;
    for (int r = 0; r < 16; ++r) x.data_as<float>()[r] = base + r;
    for (int r = 0; r < 16; ++r) y.data_as<float>()[r] = -1;
  }
  void expect_output(float base) const {
    for (int r = 0; r < n; ++r) EXPECT_EQ(y.data_as<float>()[r], (base + r + 1) * 2 + 10) << "row " << r;
  }
};

// Nesting (docs/CUDA_GRAPHS.md §5): one FULL wrapper around the model, a PIECEWISE wrapper around each piece.
struct Nested {
  FakeModel m;
  std::vector<std::unique_ptr<CUDAGraphWrapper>> pieces;
  std::unique_ptr<CUDAGraphWrapper> full;
  Nested() {
    for (int i = 0; i < 2; ++i)
      pieces.push_back(std::make_unique<CUDAGraphWrapper>([this, i] { m.piece(i); }, M::PIECEWISE, m.stream));
    full = std::make_unique<CUDAGraphWrapper>(
        [this] {
          (*pieces[0])();
          m.attention();
          (*pieces[1])();
        },
        M::FULL, m.stream);
  }
  void step(M runtime, int rows, float base) {
    m.set_input(rows, base);
    ForwardContextScope scope(ForwardContext{runtime, BatchDescriptor::mixed(rows)});
    (*full)();
  }
  int piece_captures() const { return pieces[0]->num_captures() + pieces[1]->num_captures(); }
};

TEST(CUDAGraphWrapper, FullModeRecordsEverythingInOneGraph) {
  Nested t;
  t.step(M::FULL, 4, 0);
  t.m.expect_output(0);
  EXPECT_EQ(t.full->num_captures(), 1);
  EXPECT_EQ(t.full->num_graph_nodes(), 3u);  // piece 0, attention, piece 1
  EXPECT_EQ(t.piece_captures(), 0);          // inner wrappers passed through
  const int launches = t.m.attention_launches;
  // Replay reads the new inputs from the persistent buffers; nothing is launched from the host.
  t.step(M::FULL, 4, 100);
  t.m.expect_output(100);
  EXPECT_EQ(t.full->num_captures(), 1);
  EXPECT_EQ(t.full->num_replays(), 1);
  EXPECT_EQ(t.m.attention_launches, launches);
  // A new key captures a new graph; the old one is kept.
  t.step(M::FULL, 8, 7);
  t.m.expect_output(7);
  EXPECT_EQ(t.full->num_captures(), 2);
  EXPECT_EQ(t.full->num_graphs(), 2u);
}

TEST(CUDAGraphWrapper, PiecewiseModeRunsAttentionEagerlyBetweenPieceGraphs) {
  Nested t;
  t.step(M::PIECEWISE, 4, 0);
  t.m.expect_output(0);
  EXPECT_EQ(t.full->num_captures(), 0);  // outer wrapper passed through
  EXPECT_EQ(t.piece_captures(), 2);
  EXPECT_EQ(t.pieces[0]->num_graph_nodes(), 1u);
  const int launches = t.m.attention_launches;
  t.step(M::PIECEWISE, 4, 50);
  t.m.expect_output(50);
  EXPECT_EQ(t.piece_captures(), 2);
  EXPECT_EQ(t.pieces[1]->num_replays(), 1);
  EXPECT_EQ(t.m.attention_launches, launches + 1);  // attention is launched eagerly every step
}

TEST(CUDAGraphWrapper, NoneModePassesThroughEverywhere) {
  Nested t;
  for (int i = 0; i < 3; ++i) {
    t.step(M::NONE, 4, float(i));
    t.m.expect_output(float(i));
  }
  EXPECT_EQ(t.full->num_captures() + t.piece_captures(), 0);
  EXPECT_EQ(t.full->num_graphs() + t.pieces[0]->num_graphs(), 0u);
}

TEST(CUDAGraphWrapper, NoForwardContextPassesThrough) {
  Nested t;
  t.m.set_input(3, 1);
  (*t.full)();
  t.m.expect_output(1);
  EXPECT_EQ(t.full->num_captures() + t.piece_captures(), 0);
}

TEST(CUDAGraphWrapper, MixedModesKeepSeparateGraphs) {
  Nested t;
  t.step(M::FULL, 4, 0);
  t.step(M::PIECEWISE, 4, 1);
  t.m.expect_output(1);
  t.step(M::FULL, 4, 2);
  t.m.expect_output(2);
  t.step(M::PIECEWISE, 4, 3);
  t.m.expect_output(3);
  EXPECT_EQ(t.full->num_captures(), 1);
  EXPECT_EQ(t.piece_captures(), 2);
}

TEST(CUDAGraphWrapper, AddressCheckCatchesAChangedInput) {
  FakeModel m;
  CUDAGraphWrapper::Options opts;
  opts.name = "piece 0";
  opts.check_addresses = true;
  CUDAGraphWrapper w([&] { m.piece(0); }, M::PIECEWISE, m.stream, opts);
  Tensor other = Tensor::empty({16}, DType::F32, m.alloc);
  std::vector<const void*> same{m.x.data()}, moved{other.data()};
  m.set_input(4, 0);
  ForwardContextScope scope(ForwardContext{M::PIECEWISE, BatchDescriptor::mixed(4)});
  w(same);
  w(same);
  try {
    w(moved);
    FAIL() << "a changed input address must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("piece 0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("persistent"), std::string::npos) << e.what();
  }
}

TEST(CUDAGraphWrapper, AllocationDuringCaptureFailsAndLeavesTheStreamUsable) {
  FakeModel m;
  CUDAGraphWrapper w([&] { Tensor::empty({4}, DType::F32, m.alloc); }, M::FULL, m.stream);
  {
    ForwardContextScope scope(ForwardContext{M::FULL, BatchDescriptor::mixed(4)});
    EXPECT_THROW(w(), Error);
  }
  EXPECT_FALSE(m.stream.capturing());
  EXPECT_FALSE(m.alloc.capture_guard_raised());
  EXPECT_EQ(w.num_graphs(), 0u);
}

TEST(CUDAGraphWrapper, CaptureAfterStartUpIsRefusedNamingTheDescriptor) {
  Nested n;
  n.step(M::FULL, 4, 0.0f);  // start-up: captured
  n.m.set_input(4, 3.0f);
  {
    ForwardContextScope scope(ForwardContext{M::FULL, BatchDescriptor::mixed(4), false});
    (*n.full)();  // replays what start-up captured
  }
  n.m.expect_output(3.0f);
  n.m.set_input(8, 0.0f);
  ForwardContextScope scope(ForwardContext{M::FULL, BatchDescriptor::mixed(8), false});
  try {
    (*n.full)();
    ADD_FAILURE() << "a graph was captured after start-up";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("capturing is closed"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(BatchDescriptor::mixed(8).str()), std::string::npos) << e.what();
  }
  EXPECT_EQ(n.full->num_refused(), 1);
  EXPECT_EQ(n.full->num_captures(), 1);
}

TEST(ForwardContext, ScopesNestAndRestore) {
  EXPECT_EQ(current_forward_context(), nullptr);
  {
    ForwardContextScope a(ForwardContext{M::FULL, BatchDescriptor::mixed(8)});
    EXPECT_EQ(current_forward_context()->runtime_mode, M::FULL);
    {
      ForwardContextScope b(ForwardContext{M::NONE, BatchDescriptor::mixed(3)});
      EXPECT_EQ(current_forward_context()->batch.num_tokens, 3);
    }
    EXPECT_EQ(current_forward_context()->batch.num_tokens, 8);
  }
  EXPECT_EQ(current_forward_context(), nullptr);
  EXPECT_THROW(ForwardContextScope(ForwardContext{M::FULL_AND_PIECEWISE, {}}), Error);
}

}  // namespace
}  // namespace gs
