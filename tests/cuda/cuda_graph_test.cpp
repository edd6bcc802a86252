// CUDA streams and graphs: capture bakes addresses in, replay reads the persistent buffers'
// current contents, and nothing may allocate while capturing.
#include <gtest/gtest.h>

#include "core/cuda/cuda_allocator.h"
#include "core/cuda/cuda_stream.h"
#include "core/error.h"
#include "cuda_test_util.h"
#include "ops/cuda/cuda_backend.h"

namespace gs {
namespace {

using namespace test;  // cuda_test_util.h

TEST(CudaGraph, AllocationDuringCaptureThrows) {
  GS_REQUIRE_GPU();
  CudaAllocator alloc;
  CudaStream stream(0, &alloc);
  stream.begin_capture();
  EXPECT_TRUE(stream.capturing());
  EXPECT_THROW(Tensor::empty({16}, DType::F32, alloc), Error);
  auto g = stream.end_capture();
  EXPECT_EQ(g->num_nodes(), 0u);
  EXPECT_NO_THROW(Tensor::empty({16}, DType::F32, alloc));
}

// norm -> linear (GEMV and cuBLASLt) -> gated activation -> linear, captured once, replayed after the
// inputs in the persistent buffers change: equals an eager run on the same inputs.
TEST(CudaGraph, ReplayEqualsEagerAfterInputsChange) {
  GS_REQUIRE_GPU();
  auto gpu = make_cuda_backend();
  const int H = 256, I = 512;
  Tensor w_norm = on(*gpu, randn(H, 1), {H}, DType::BF16);
  Tensor w_up = on(*gpu, randn(2 * I * H, 2, 0.05f), {2 * I, H}, DType::BF16);
  Tensor w_out = on(*gpu, randn(H * I, 3, 0.05f), {H, I}, DType::BF16);
  for (int T : {1, 24}) {  // GEMV and cuBLASLt paths
    SCOPED_TRACE(T);
    Tensor x = Tensor::empty({T, H}, DType::BF16, gpu->allocator());
    Tensor h = Tensor::empty({T, H}, DType::BF16, gpu->allocator());
    Tensor gu = Tensor::empty({T, 2 * I}, DType::BF16, gpu->allocator());
    Tensor a = Tensor::empty({T, I}, DType::BF16, gpu->allocator());
    Tensor y = Tensor::empty({T, H}, DType::F32, gpu->allocator());
    auto forward = [&] {
      gpu->rms_norm(x, w_norm, 1e-5f, h);
      gpu->linear(h, w_up, Tensor(), gu);
      gpu->gated_activation(GatedActivation::Silu, gu, a);
      gpu->linear(a, w_out, Tensor(), y);
    };
    gpu->copy(x, on(*gpu, randn(T * H, 10), {T, H}, DType::BF16));
    forward();  // warm-up: cuBLASLt plans are made eagerly
    gpu->stream().begin_capture();
    forward();
    auto graph = gpu->stream().end_capture();
    EXPECT_GE(graph->num_nodes(), 4u);

    const auto x2 = randn(T * H, 11);
    gpu->copy(x, on(*gpu, x2, {T, H}, DType::BF16));
    forward();
    const auto eager_y = read(*gpu, y);
    gpu->fill_zero(y);
    graph->replay();
    EXPECT_EQ(read(*gpu, y), eager_y);

    const auto x3 = randn(T * H, 12);
    gpu->copy(x, on(*gpu, x3, {T, H}, DType::BF16));
    graph->replay();
    const auto replay_y = read(*gpu, y);
    forward();
    EXPECT_EQ(read(*gpu, y), replay_y);
    EXPECT_GT(rel_l2(replay_y, eager_y), 0.1);  // the new input was really used
  }
}

TEST(CudaGraph, EventTimerMeasuresWork) {
  GS_REQUIRE_GPU();
  auto gpu = make_cuda_backend();
  Tensor t = Tensor::empty({1 << 20}, DType::F32, gpu->allocator());
  auto* cs = dynamic_cast<CudaStream*>(&gpu->stream());
  ASSERT_NE(cs, nullptr);
  CudaEventTimer timer(cs->handle());
  timer.start();
  for (int i = 0; i < 10; ++i) gpu->fill_zero(t);
  timer.stop();
  EXPECT_GT(timer.elapsed_ms(), 0.0f);
}

TEST(CudaDevice, InfoIsSane) {
  GS_REQUIRE_GPU();
  const CudaDeviceInfo info = cuda_device_info(0);
  EXPECT_FALSE(info.name.empty());
  EXPECT_GT(info.sm_count, 0);
  EXPECT_GT(info.total_memory, info.free_memory / 2);
  EXPECT_LE(cuda_free_memory(), cuda_total_memory());
  EXPECT_THROW(cuda_device_info(1000), Error);
}

}  // namespace
}  // namespace gs
