// The CUDA LoRA shrink and expand (bf16 and f32) against the CPU reference, on a batch mixing
// adapter slots, base-model rows (slot -1) that must stay untouched, and rank padding.
#include <gtest/gtest.h>

#include "core/error.h"
#include "cuda_test_util.h"
#include "ops/cuda/cuda_backend.h"

namespace gs {
namespace {

using namespace test;  // cuda_test_util.h

class CudaLora : public ::testing::TestWithParam<DType> {
 protected:
  // Shrink then expand on both backends; base rows (slot -1) must keep y exactly.
  void check(int64_t T, int64_t K, int64_t N, int64_t S, int64_t R, const std::vector<int32_t>& slots) {
    const DType dt = GetParam();
    auto gpu = make_cuda_backend(0, dt);
    auto cpu = make_cpu_backend();
    const auto x = randn(size_t(T * K), 1), a = randn(size_t(S * R * K), 2, 0.1f);
    const auto bt = randn(size_t(S * R * N), 3, 0.1f), y0 = randn(size_t(T * N), 4);
    Tensor cs = on_i32(*cpu, slots, {T}), gs_ = on_i32(*gpu, slots, {T});
    Tensor cy = on(*cpu, y0, {T, N}, DType::F32), gy = on(*gpu, y0, {T, N}, dt);
    Tensor ctmp = Tensor::empty({T, R}, DType::F32, cpu->allocator());
    Tensor gtmp = Tensor::empty({T, R}, DType::F32, gpu->allocator());
    cpu->lora_shrink(on(*cpu, x, {T, K}, DType::F32), on(*cpu, a, {S, R, K}, DType::F32), cs, ctmp);
    cpu->lora_expand(ctmp, on(*cpu, bt, {S, R, N}, DType::F32), cs, cy);
    gpu->lora_shrink(on(*gpu, x, {T, K}, dt), on(*gpu, a, {S, R, K}, dt), gs_, gtmp);
    gpu->lora_expand(gtmp, on(*gpu, bt, {S, R, N}, dt), gs_, gy);
    const auto want = read(*cpu, cy), got = read(*gpu, gy);
    EXPECT_LT(rel_l2(got, want), dt == DType::F32 ? 1e-5 : 1e-2) << "K " << K << " N " << N;
    const auto y0_dev = read(*gpu, on(*gpu, y0, {T, N}, dt));  // y0 rounded to the compute dtype
    for (int64_t t = 0; t < T; ++t)
      if (slots[size_t(t)] < 0)
        for (int64_t n = 0; n < N; ++n)
          ASSERT_EQ(got[size_t(t * N + n)], y0_dev[size_t(t * N + n)]) << "base row " << t;
  }
};

TEST_P(CudaLora, ScalarPathsMatchCpuAndSkipBaseRows) {  // K, N not multiples of a 16-byte vector
  GS_REQUIRE_GPU();
  check(7, 203, 300, 3, 24, {0, -1, 2, 1, 2, -1, 0});
}

TEST_P(CudaLora, VectorPathsMatchCpuAndSkipBaseRows) {  // the real models' shapes
  GS_REQUIRE_GPU();
  check(5, 2048, 1024, 4, 48, {3, -1, 0, 3, 1});
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaLora, ::testing::Values(DType::BF16, DType::F32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace gs
