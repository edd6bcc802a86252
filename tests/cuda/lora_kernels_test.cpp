// The CUDA LoRA op (bf16 and f32) against the CPU reference, on batches mixing adapter slots and
// base-model rows (slot -1) that must stay untouched: odd shapes (scalar kernels), the real
// models' shapes (16-byte kernels: rank rows beyond what a thread holds across pdl_wait, K of
// 8192, one token over many column blocks, many tokens), and fused q|k|v and gate|up whose
// block-diagonal B^T the expand reads only where it is not zero, per token (below 64 tokens)
// and segmented (16-token chunks per slot, from 64 tokens on).
#include <gtest/gtest.h>

#include "core/error.h"
#include "cuda_test_util.h"
#include "ops/cuda/cuda_backend.h"

namespace gs {
namespace {

using namespace test;  // cuda_test_util.h

class CudaLora : public ::testing::TestWithParam<DType> {
 protected:
  // lora_apply on both backends; base rows (slot -1) must keep y exactly.
  void check(int64_t T, int64_t K, int64_t N, int64_t S, int64_t R, const std::vector<int32_t>& slots,
             const LoraParts& parts = {}) {
    const DType dt = GetParam();
    auto gpu = make_cuda_backend(0, dt);
    auto cpu = make_cpu_backend();
    const auto x = randn(size_t(T * K), 1), a = randn(size_t(S * R * K), 2, 0.1f), y0 = randn(size_t(T * N), 4);
    auto bt = randn(size_t(S * R * N), 3, 0.1f);
    for (int64_t r = 0; r < S * R; ++r)  // zero outside the fused targets' blocks, as LoraSlots lays them out
      for (int64_t n = 0; n < N; ++n) {
        int c = 0;
        while (c + 1 < parts.n && n >= parts.begin[size_t(c + 1)]) ++c;
        if ((r % R) / (R / parts.n) != c) bt[size_t(r * N + n)] = 0.0f;
      }
    Tensor cs = on_i32(*cpu, slots, {T}), gs_ = on_i32(*gpu, slots, {T});
    Tensor cy = on(*cpu, y0, {T, N}, DType::F32), gy = on(*gpu, y0, {T, N}, dt);
    Tensor ctmp = Tensor::empty({T, R}, DType::F32, cpu->allocator());
    Tensor gtmp = Tensor::empty({T, R}, DType::F32, gpu->allocator());
    cpu->lora_apply(on(*cpu, x, {T, K}, DType::F32), on(*cpu, a, {S, R, K}, DType::F32),
                    on(*cpu, bt, {S, R, N}, DType::F32), cs, ctmp, cy, parts);
    gpu->lora_apply(on(*gpu, x, {T, K}, dt), on(*gpu, a, {S, R, K}, dt), on(*gpu, bt, {S, R, N}, dt), gs_, gtmp, gy,
                    parts);
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

TEST_P(CudaLora, OneTokenWideRowsAndHighRank) {  // gate_up of llama3.2-1b at bs 1; rank rows past 48
  GS_REQUIRE_GPU();
  check(1, 2048, 16384, 2, 32, {1});
  check(2, 8192, 2048, 2, 64, {1, 0});
  check(1, 9000, 512, 1, 16, {0});  // K past what the shrink threads hold
}

TEST_P(CudaLora, ManyTokens) {  // down of llama3.2-1b at bs 300 (every third row the base model)
  GS_REQUIRE_GPU();
  std::vector<int32_t> slots(300);
  for (size_t t = 0; t < slots.size(); ++t) slots[t] = t % 3 == 2 ? -1 : int32_t(t % 4);
  check(300, 8192, 2048, 4, 16, slots);
  std::vector<int32_t> mixed(70);  // from 64 tokens on, 4 rank rows a shrink block: 18 is not a multiple
  for (size_t t = 0; t < mixed.size(); ++t) mixed[t] = t % 5 == 4 ? -1 : int32_t(t % 2);
  check(70, 2048, 1024, 2, 18, mixed);
}

TEST_P(CudaLora, FusedTargetsPerToken) {  // qkv and gate_up of llama3.2-1b below 64 tokens, 8 adapters and the base
  GS_REQUIRE_GPU();
  std::vector<int32_t> slots(45);
  for (size_t t = 0; t < slots.size(); ++t) slots[t] = int32_t((t * 5 + t / 7) % 9) - 1;
  check(45, 2048, 3072, 8, 48, slots, {3, {0, 2048, 2560}});
  check(45, 2048, 16384, 8, 32, slots, {2, {0, 8192}});
  check(3, 2048, 3000, 2, 40, {1, -1, 0}, {2, {0, 1003}});  // a boundary inside a 16-byte group: one target
}

TEST_P(CudaLora, FusedTargetsSegmented) {  // from 64 tokens on the expand serves 16-token chunks per slot
  GS_REQUIRE_GPU();
  std::vector<int32_t> slots(77);
  for (size_t t = 0; t < slots.size(); ++t) slots[t] = int32_t((t * 5 + t / 7) % 9) - 1;
  check(77, 2048, 3072, 8, 48, slots, {3, {0, 2048, 2560}});
  check(77, 2048, 16384, 8, 32, slots, {2, {0, 8192}});
  check(64, 2048, 3000, 2, 40, std::vector<int32_t>(64, 1), {2, {0, 1003}});  // one target; rows past those held
  check(70, 2048, 1024, 1, 16, std::vector<int32_t>(70, 0));                  // every token one adapter: 5 chunks
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaLora, ::testing::Values(DType::BF16, DType::F32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace gs
