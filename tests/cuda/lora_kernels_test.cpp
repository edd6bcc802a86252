// The CUDA LoRA op (bf16 and f32) against the CPU reference, on batches mixing adapter slots and
// base-model rows (slot -1) that must stay untouched: odd shapes (scalar kernels), the real
// models' shapes (16-byte kernels: rank rows beyond what a thread holds across pdl_wait, K of
// 8192, one token over many column blocks, many tokens), and fused q|k|v and gate|up whose
// block-diagonal B^T the expand reads only where it is not zero, per token (below 64 tokens)
// and segmented (16-token chunks per slot, from 64 tokens on); the expand fused with the gated
// activation and with the residual add + RMSNorm after it.
#include <gtest/gtest.h>

#include "core/error.h"
#include "cuda_test_util.h"
#include "ops/cuda/cuda_backend.h"

namespace gs {
namespace {

using namespace test;  // cuda_test_util.h

// Random B^T [S, R, N], zero outside the fused targets' blocks, as LoraSlots lays them out.
std::vector<float> block_diagonal_bt(int64_t S, int64_t R, int64_t N, const LoraParts& parts, uint32_t seed) {
  auto bt = randn(size_t(S * R * N), seed, 0.1f);
  for (int64_t r = 0; r < S * R; ++r)
    for (int64_t n = 0; n < N; ++n) {
      int c = 0;
      while (c + 1 < parts.n && n >= parts.begin[size_t(c + 1)]) ++c;
      if ((r % R) / (R / parts.n) != c) bt[size_t(r * N + n)] = 0.0f;
    }
  return bt;
}

// Slots of T tokens spread over 8 adapters and the base model (-1).
std::vector<int32_t> spread_slots(size_t T) {
  std::vector<int32_t> slots(T);
  for (size_t t = 0; t < T; ++t) slots[t] = int32_t((t * 5 + t / 7) % 9) - 1;
  return slots;
}

class CudaLora : public ::testing::TestWithParam<DType> {
 protected:
  // lora_apply on both backends; base rows (slot -1) must keep y exactly.
  void check(int64_t T, int64_t K, int64_t N, int64_t S, int64_t R, const std::vector<int32_t>& slots,
             const LoraParts& parts = {}) {
    const DType dt = GetParam();
    auto gpu = make_cuda_backend(0, dt);
    auto cpu = make_cpu_backend();
    const auto x = randn(size_t(T * K), 1), a = randn(size_t(S * R * K), 2, 0.1f), y0 = randn(size_t(T * N), 4);
    const auto bt = block_diagonal_bt(S, R, N, parts, 3);
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
      if (slots[size_t(t)] < 0) {
        for (int64_t n = 0; n < N; ++n)
          ASSERT_EQ(got[size_t(t * N + n)], y0_dev[size_t(t * N + n)]) << "base row " << t;
      }
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
  const auto slots = spread_slots(45);
  check(45, 2048, 3072, 8, 48, slots, {3, {0, 2048, 2560}});
  check(45, 2048, 16384, 8, 32, slots, {2, {0, 8192}});
  check(3, 2048, 3000, 2, 40, {1, -1, 0}, {2, {0, 1003}});  // a boundary inside a 16-byte group: one target
}

TEST_P(CudaLora, FusedTargetsSegmented) {  // from 64 tokens on the expand serves 16-token chunks per slot
  GS_REQUIRE_GPU();
  const auto slots = spread_slots(77);
  check(77, 2048, 3072, 8, 48, slots, {3, {0, 2048, 2560}});
  check(77, 2048, 16384, 8, 32, slots, {2, {0, 8192}});
  check(64, 2048, 3000, 2, 40, std::vector<int32_t>(64, 1), {2, {0, 1003}});  // one target; rows past those held
  check(70, 2048, 1024, 1, 16, std::vector<int32_t>(70, 0));                  // every token one adapter: 5 chunks
}

// The expand fused with the op after it (one kernel on the GPU) against lora_expand then that op
// on the CPU: tmp as the shrink leaves it, bt block-diagonal over gate | up.
class CudaLoraFused : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    GS_REQUIRE_GPU();
    gpu_ = make_cuda_backend(0, GetParam());
  }
  std::unique_ptr<Backend> gpu_, cpu_ = make_cpu_backend();
  double tol() const { return GetParam() == DType::F32 ? 1e-5 : 1e-2; }

  // y [T, N] as the stacked GEMM leaves it (Backend::lora_stacked): f32 [T, N + P], token t's shrink
  // tmp[t] in its slot's R columns after N, every other slot's columns noise the expand must skip.
  static std::vector<float> widen(const std::vector<float>& y, const std::vector<float>& tmp,
                                  const std::vector<int32_t>& slots, int64_t N, int64_t S, int64_t R) {
    const int64_t T = int64_t(slots.size()), W = N + lora_stacked_width(S, R);
    auto wide = randn(size_t(T * W), 99, 100.0f);
    for (int64_t t = 0; t < T; ++t) {
      std::copy_n(y.begin() + t * N, N, wide.begin() + t * W);
      if (const int s = slots[size_t(t)]; s >= 0) std::copy_n(tmp.begin() + t * R, R, wide.begin() + t * W + N + s * R);
    }
    return wide;
  }
  // The tmp and y a backend's fused op gets: lora_shrink's f32 tmp and y, or (stacked, GPU only)
  // no tmp and the widened y.
  std::pair<Tensor, Tensor> tmp_and_y(Backend& b, DType d, bool stacked, const std::vector<float>& tmp,
                                      const std::vector<float>& y, const std::vector<int32_t>& slots, int64_t N,
                                      int64_t S, int64_t R) {
    const int64_t T = int64_t(slots.size());
    if (stacked && &b == gpu_.get())
      return {Tensor(), on(b, widen(y, tmp, slots, N, S, R), {T, N + lora_stacked_width(S, R)}, DType::F32)};
    return {on(b, tmp, {T, R}, DType::F32), on(b, y, {T, N}, d)};
  }

  // gate_up [T, 2I] with R rank rows (R/2 a target); base rows' out must equal the plain op's.
  void gated(int64_t T, int64_t I, int64_t S, int64_t R, const std::vector<int32_t>& slots, bool stacked = false) {
    const DType dt = GetParam();
    const LoraParts parts{2, {0, I}};
    const auto tmp = randn(size_t(T * R), 5), g0 = randn(size_t(T * 2 * I), 6);
    const auto bt = block_diagonal_bt(S, R, 2 * I, parts, 7);
    auto run = [&](Backend& b, DType d) {
      Tensor out = Tensor::empty({T, I}, d, b.allocator());
      const auto [tv, y] = tmp_and_y(b, d, stacked, tmp, g0, slots, 2 * I, S, R);
      b.lora_expand(tv, on(b, bt, {S, R, 2 * I}, d), on_i32(b, slots, {T}), y, parts,
                    Gated{GatedActivation::Silu, out});
      return read(b, out);
    };
    const auto got = run(*gpu_, dt), want = run(*cpu_, DType::F32);
    EXPECT_LT(rel_l2(got, want), tol()) << "T " << T << " I " << I;
    Tensor plain = Tensor::empty({T, I}, dt, gpu_->allocator());
    gpu_->gated_activation(GatedActivation::Silu, on(*gpu_, g0, {T, 2 * I}, dt), plain);
    const auto base = read(*gpu_, plain);
    for (int64_t t = 0; t < T; ++t) {
      if (slots[size_t(t)] >= 0) continue;
      for (int64_t i = 0; i < I; ++i) ASSERT_EQ(got[size_t(t * I + i)], base[size_t(t * I + i)]) << "base row " << t;
    }
  }

  // qkv [T, (hq + 2 hkv) D] += the expand of R rank rows (q | k | v), then split + RoPE (with
  // Qwen3's q/k norm when qk_norm: the unfused pair).
  void qkv(int64_t T, int hq, int hkv, int D, int64_t S, int64_t R, const std::vector<int32_t>& slots, bool qk_norm,
           bool stacked = false) {
    const DType dt = GetParam();
    const int64_t N = int64_t(hq + 2 * hkv) * D, Q = int64_t(hq) * D, KV = int64_t(hkv) * D;
    const LoraParts parts{3, {0, Q, Q + KV}};
    const auto tmp = randn(size_t(T * R), 13), qkv0 = randn(size_t(T * N), 14), nw = randn(size_t(D), 15, 0.1f);
    const auto bt = block_diagonal_bt(S, R, N, parts, 16);
    std::vector<int32_t> pos(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) pos[size_t(t)] = int32_t(t * 37 % 1000);
    RopeConfig rope;
    rope.theta = 500000.0f;
    rope.head_dim = D;
    auto run = [&](Backend& b, DType d) {
      Tensor q = Tensor::empty({T, Q}, d, b.allocator()), k = Tensor::empty({T, KV}, d, b.allocator());
      Tensor v = Tensor::empty({T, KV}, d, b.allocator());
      const Tensor norm = qk_norm ? on(b, nw, {D}, d) : Tensor();
      const auto [tv, y] = tmp_and_y(b, d, stacked, tmp, qkv0, slots, N, S, R);
      b.lora_expand(tv, on(b, bt, {S, R, N}, d), on_i32(b, slots, {T}), y, parts,
                    SplitQkvRope{on_i32(b, pos, {T}), &rope, norm, norm, 1e-6f, q, k, v});
      return std::vector{read(b, q), read(b, k), read(b, v)};
    };
    const auto got = run(*gpu_, dt), want = run(*cpu_, DType::F32);
    for (size_t i = 0; i < 3; ++i) EXPECT_LT(rel_l2(got[i], want[i]), tol()) << "q, k, v: " << i << " D " << D;
  }

  // x [T, H] += the expand of R rank rows, then residual += x and x = rms_norm(residual) * w.
  void add_norm(int64_t T, int64_t H, int64_t S, int64_t R, const std::vector<int32_t>& slots, DType residual_dt,
                bool stacked = false) {
    const DType dt = GetParam();
    const auto tmp = randn(size_t(T * R), 8), bt = randn(size_t(S * R * H), 9, 0.1f);
    const auto x0 = randn(size_t(T * H), 10), r0 = randn(size_t(T * H), 11), w = randn(size_t(H), 12);
    auto run = [&](Backend& b, DType d, DType rd) {
      const auto [tv, x] = tmp_and_y(b, d, stacked, tmp, x0, slots, H, S, R);
      Tensor res = on(b, r0, {T, H}, rd), out = tv.defined() ? x : Tensor::empty({T, H}, d, b.allocator());
      b.lora_expand(tv, on(b, bt, {S, R, H}, d), on_i32(b, slots, {T}), x, LoraParts{},
                    AddRmsNorm{res, on(b, w, {H}, d), 1e-5f, out});
      return std::pair{read(b, out), read(b, res)};
    };
    const auto [gx, gr] = run(*gpu_, dt, residual_dt);
    const auto [cx, cr] = run(*cpu_, DType::F32, DType::F32);
    EXPECT_LT(rel_l2(gx, cx), tol()) << "T " << T << " H " << H;
    EXPECT_LT(rel_l2(gr, cr), tol()) << "T " << T << " H " << H;
  }
};

TEST_P(CudaLoraFused,
       ExpandIntoSplitQkvRope) {  // qkv of llama3.2-1b (D 64): bs 1, 45 tokens of 8 adapters and the base
  GS_REQUIRE_GPU();
  qkv(1, 32, 8, 64, 2, 48, {1}, false);
  qkv(45, 32, 8, 64, 8, 48, spread_slots(45), false);
  qkv(3, 4, 2, 128, 2, 60, {1, -1, 0}, false);  // D 128; rank rows past those held
  qkv(3, 4, 2, 32, 2, 48, {0, 1, -1}, false);   // D 32
  qkv(3, 4, 2, 64, 2, 48, {0, 1, -1}, true);    // q/k norm: the unfused pair
}

TEST_P(CudaLoraFused,
       ExpandIntoGatedActivation) {  // gate_up of llama3.2-1b: bs 1, 45 tokens of 8 adapters and the base
  GS_REQUIRE_GPU();
  gated(1, 8192, 2, 32, {1});
  gated(45, 8192, 8, 32, spread_slots(45));
  gated(3, 1000, 2, 40, {1, -1, 0});  // rank rows past those held; a row end inside a 32-chunk block
  std::vector<int32_t> many(70);      // from 64 tokens: the segmented expand, then the plain activation
  for (size_t t = 0; t < many.size(); ++t) many[t] = t % 5 == 4 ? -1 : int32_t(t % 2);
  gated(70, 8192, 2, 32, many);
  gated(2, 1001, 1, 16, {0, -1});  // I not a multiple of 8: the unfused pair
}

TEST_P(CudaLoraFused, ExpandIntoAddRmsNorm) {  // o / down of llama3.2-1b (H 2048), wider rows, odd shapes
  GS_REQUIRE_GPU();
  const auto slots = spread_slots(45);
  add_norm(1, 2048, 2, 16, {1}, GetParam());
  add_norm(45, 2048, 8, 16, slots, GetParam());
  add_norm(45, 2048, 8, 16, slots, DType::F32);      // an fp32 residual stream
  add_norm(3, 4096, 2, 24, {1, -1, 0}, GetParam());  // 2 chunks a thread; rank rows past those held
  add_norm(2, 8192, 1, 64, {0, -1}, GetParam());     // 4 chunks a thread
  add_norm(2, 1000, 1, 16, {-1, 0}, GetParam());     // a partial last chunk block
  add_norm(2, 300 + 2, 1, 16, {0, 0}, GetParam());   // H not a multiple of 8: the unfused pair
}

// The stacked shrink (Backend::lora_stacked): the fused ops read each token's shrink from its
// slot's columns of the projection's widened f32 output.
TEST_P(CudaLoraFused, StackedShrinkInTheProjectionsOutput) {
  GS_REQUIRE_GPU();
  const auto slots = spread_slots(45);
  qkv(45, 32, 8, 64, 8, 48, slots, false, true);
  qkv(3, 4, 2, 128, 3, 60, {1, -1, 2}, false, true);  // S R = 180: 4 padding columns
  gated(45, 8192, 8, 32, slots, true);
  gated(3, 1000, 3, 40, {2, -1, 0}, true);
  add_norm(45, 2048, 8, 16, slots, GetParam(), true);
  add_norm(45, 2048, 8, 16, slots, DType::F32, true);
  add_norm(3, 4096, 3, 12, {1, -1, 2}, GetParam(), true);  // S R = 36: 4 padding columns
  // A stacked y of the wrong width is refused, naming the expected one.
  auto bt = on(*gpu_, randn(size_t(2 * 16 * 64), 1), {2, 16, 64}, GetParam());
  Tensor y = Tensor::empty({2, 64 + 8}, GetParam(), gpu_->allocator()),
         res = Tensor::empty({2, 64}, DType::F32, gpu_->allocator());
  Tensor out = Tensor::empty({2, 64}, GetParam(), gpu_->allocator());
  EXPECT_THROW(gpu_->lora_expand(Tensor(), bt, on_i32(*gpu_, {0, 1}, {2}), y, LoraParts{},
                                 AddRmsNorm{res, on(*gpu_, randn(64, 2), {64}, GetParam()), 1e-5f, out}),
               Error);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaLoraFused, ::testing::Values(DType::BF16, DType::F32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaLora, ::testing::Values(DType::BF16, DType::F32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace gs
