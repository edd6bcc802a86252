// Tensor views and ownership, DType conversions, and CpuStream capture.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

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

// Known IEEE bit patterns both ways, round-to-nearest-even at the narrowing, and the edges
// (f16's largest finite value, its overflow to infinity, its subnormals; bf16's NaN).
TEST(DType, Bf16AndF16RoundTrip) {
  struct Case {
    float f;
    uint16_t bf16, f16;
  };
  for (const Case& c : {Case{0.0f, 0x0000, 0x0000}, Case{1.0f, 0x3F80, 0x3C00}, Case{-2.5f, 0xC020, 0xC100},
                        Case{3.140625f, 0x4049, 0x4248}, Case{65504.0f, 0x4780, 0x7BFF}, Case{1e-3f, 0x3A83, 0x1419},
                        Case{0x1p-24f, 0x3380, 0x0001}}) {
    EXPECT_EQ(f32_to_bf16(c.f), c.bf16) << c.f;
    EXPECT_EQ(f32_to_f16(c.f), c.f16) << c.f;
    EXPECT_EQ(f32_to_f16(f16_to_f32(c.f16)), c.f16) << c.f;  // a half's value converts back to it
  }
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x1419), 0x1.064p-10f);  // 1e-3 rounded to 10 mantissa bits: 0.0010004...
  EXPECT_EQ(f16_to_f32(0x0001), 0x1p-24f);      // the smallest subnormal
  EXPECT_EQ(bf16_to_f32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xC020), -2.5f);
  EXPECT_EQ(bf16_to_f32(0x4780), 65536.0f);           // 65504 rounded up to bf16's 8 bits
  EXPECT_EQ(f32_to_bf16(1.0f + 1.0f / 256), 0x3F80);  // a tie: to the even 0x3F80
  EXPECT_EQ(f32_to_bf16(1.0f + 3.0f / 256), 0x3F82);  // a tie: to the even 0x3F82, up
  EXPECT_EQ(f32_to_f16(1.0f + 1.0f / 2048), 0x3C00);  // f16's ties, too
  EXPECT_EQ(f32_to_f16(1.0f + 3.0f / 2048), 0x3C02);
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7BFF);  // below the midpoint to 65536: the largest finite
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);  // the midpoint rounds to even: infinity
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7C00)));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
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
