// Tensor views and ownership, DType conversions, and CpuStream capture.
#include <gtest/gtest.h>

#include "core/cpu_stream.h"
#include "core/error.h"
#include "core/tensor.h"

namespace gs {
namespace {

TEST(Tensor, RowsAndReshapeShareMemory) {
  CpuAllocator alloc;
  Tensor t = Tensor::empty({4, 3}, DType::F32, alloc);
  for (int i = 0; i < 12; ++i) t.data_as<float>()[i] = float(i);
  Tensor r = t.rows(1, 2);
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  EXPECT_EQ(r.data_as<float>()[0], 3.0f);
  EXPECT_EQ(t.reshape({-1}).dim(0), 12);
  EXPECT_THROW(t.rows(3, 2), Error);
  EXPECT_THROW(t.reshape({5, -1}), Error);
  EXPECT_EQ(alloc.bytes_in_use(), 48u);
}

TEST(Tensor, MemoryIsFreedWithTheLastView) {
  CpuAllocator alloc;
  {
    Tensor view;
    {
      Tensor t = Tensor::empty({8}, DType::BF16, alloc);
      view = t.rows(2, 2);
    }
    EXPECT_EQ(alloc.bytes_in_use(), 16u);
  }
  EXPECT_EQ(alloc.bytes_in_use(), 0u);
}

TEST(DType, Bf16AndF16RoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 3.140625f, 65504.0f, 1e-3f}) {
    EXPECT_EQ(bf16_to_f32(f32_to_bf16(f)), bf16_to_f32(f32_to_bf16(bf16_to_f32(f32_to_bf16(f)))));
    EXPECT_NEAR(f16_to_f32(f32_to_f16(f)), f, std::abs(f) * 1e-3f + 1e-7f);
  }
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 1.0f / 256)), 1.0f);  // ties to even
  EXPECT_THROW(parse_dtype("int4"), Error);
}

TEST(CpuStream, CaptureRecordsInsteadOfRunningAndForbidsAllocation) {
  CpuAllocator alloc;
  CpuStream stream(&alloc);
  Tensor x = Tensor::empty({1}, DType::F32, alloc);
  float* p = x.data_as<float>();
  *p = 1.0f;
  stream.begin_capture();
  stream.launch([p] { *p *= 2.0f; });
  EXPECT_EQ(*p, 1.0f);  // recorded, not run
  EXPECT_THROW(Tensor::empty({4}, DType::F32, alloc), Error);
  auto graph = stream.end_capture();
  EXPECT_EQ(graph->num_nodes(), 1u);
  graph->replay();
  graph->replay();
  EXPECT_EQ(*p, 4.0f);
  EXPECT_NO_THROW(Tensor::empty({4}, DType::F32, alloc));
}

}  // namespace
}  // namespace gs
