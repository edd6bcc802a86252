// Backend::lora_apply's fused-target description (LoraParts): malformed parts are refused with
// an error, and well-formed ones leave the CPU reference's result unchanged (the blocks of B^T
// outside the targets are zero by contract, so skipping them is exact).
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "ops/backend.h"
#include "ops/lora_shape.h"

namespace gs {
namespace {

struct LoraPartsTest : ::testing::Test {
  std::unique_ptr<Backend> be = make_cpu_backend();
  std::vector<float> xv = std::vector<float>(2 * 8, 0.5f), av = std::vector<float>(4 * 8, 0.25f);
  std::vector<float> btv = std::vector<float>(4 * 6), yv = std::vector<float>(2 * 6), tv = std::vector<float>(2 * 4);
  std::vector<int32_t> sv{0, -1};
  Tensor wrap(std::vector<float>& v, Shape s) { return Tensor::wrap(v.data(), s, DType::F32, Device::cpu()); }
  void apply(const LoraParts& p) {
    be->lora_apply(wrap(xv, {2, 8}), wrap(av, {1, 4, 8}), wrap(btv, {1, 4, 6}),
                   Tensor::wrap(sv.data(), {2}, DType::I32, Device::cpu()), wrap(tv, {2, 4}), wrap(yv, {2, 6}), p);
    be->stream().synchronize();
  }
};

TEST_F(LoraPartsTest, MalformedPartsAreRefused) {
  EXPECT_THROW(apply({3, {0, 2, 4}}), Error);  // 3 targets do not divide 4 rank rows
  EXPECT_THROW(apply({2, {0, 6}}), Error);     // target 1 starts at N
  EXPECT_THROW(apply({2, {1, 3}}), Error);     // target 0 not at column 0
  EXPECT_THROW(apply({2, {0, 0}}), Error);     // an empty target
  EXPECT_THROW(apply({4, {}}), Error);         // more than q|k|v
}

TEST_F(LoraPartsTest, TwoTargetsOverBlockDiagonalWeights) {
  for (int r = 0; r < 4; ++r)  // rows 0-1 feed columns 0-2, rows 2-3 columns 3-5
    for (int n = 0; n < 6; ++n) btv[size_t(r * 6 + n)] = (r < 2) == (n < 3) ? float(r + 1) : 0.0f;
  apply({2, {0, 3}});
  // x . a = 8 * 0.5 * 0.25 = 1 for every rank row: columns 0-2 get 1 + 2, columns 3-5 get 3 + 4.
  EXPECT_EQ(yv, (std::vector<float>{3, 3, 3, 7, 7, 7, 0, 0, 0, 0, 0, 0}));
}

// The stacked shrink's layout (Backend::lora_stacked): S R columns after y's N, padded to 8; a y
// of another width or dtype, or a CPU backend asked for it, is refused or declined.
TEST_F(LoraPartsTest, StackedShrinkLayout) {
  EXPECT_EQ(lora_stacked_width(8, 48), 384);
  EXPECT_EQ(lora_stacked_width(3, 12), 40);  // 36, padded to 8
  EXPECT_EQ(lora_stacked_width(1, 1), 8);
  std::vector<float> wide(2 * (6 + 8)), narrow(2 * (6 + 4));
  const Tensor slots = Tensor::wrap(sv.data(), {2}, DType::I32, Device::cpu()), bt = wrap(btv, {1, 4, 6});
  const LoraShape l = check_lora_expand_or_stacked(Tensor(), bt, slots, wrap(wide, {2, 14}));
  EXPECT_EQ(l.N, 6);
  EXPECT_EQ(l.R, 4);
  EXPECT_EQ(lora_projection_shape(l, wrap(wide, {2, 14}), DType::BF16).shape(), (Shape{2, 6}));
  EXPECT_THROW(check_lora_expand_or_stacked(Tensor(), bt, slots, wrap(narrow, {2, 10})), Error);  // unpadded
  EXPECT_THROW(check_lora_expand_or_stacked(Tensor(), bt, slots, wrap(yv, {2, 6})), Error);       // no shrink columns
  EXPECT_FALSE(be->lora_stacked({.op = LoraFusedOp::AddRmsNorm, .tokens = 32, .width = 2048}));
}

}  // namespace
}  // namespace gs
