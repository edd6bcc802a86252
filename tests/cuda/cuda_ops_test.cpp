// Every op of the CUDA backend, in each compute dtype (bf16, f32), against the CPU (fp32)
// backend on random data.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "core/error.h"
#include "cuda_test_util.h"
#include "ops/cuda/cuda_backend.h"

namespace gs {
namespace {

using namespace test;  // cuda_test_util.h

class CudaOps : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    GS_REQUIRE_GPU();
    gpu = make_cuda_backend(0, dt());
    cpu = make_cpu_backend();
  }
  DType dt() const { return GetParam(); }
  // bf16 storage: ~1e-2; f32 (no TF32 anywhere): rounding of fp32 sums only.
  double tol() const { return dt() == DType::F32 ? 1e-4 : 1e-2; }
  // x as a CPU f32 tensor and a GPU tensor in the compute dtype.
  std::pair<Tensor, Tensor> both(const std::vector<float>& v, const Shape& s) {
    return {on(*cpu, v, s, DType::F32), on(*gpu, v, s, dt())};
  }
  std::pair<Tensor, Tensor> empty(const Shape& s, std::optional<DType> gpu_dtype = std::nullopt) {
    return {Tensor::empty(s, DType::F32, cpu->allocator()),
            Tensor::empty(s, gpu_dtype.value_or(dt()), gpu->allocator())};
  }
  void expect_close(const Tensor& c, const Tensor& g) {
    const double e = rel_l2(read(*gpu, g), read(*cpu, c));
    EXPECT_LT(e, tol()) << g.str();
  }
  std::unique_ptr<Backend> gpu, cpu;
};

TEST_P(CudaOps, CopyRoundTripAndFillZero) {
  const auto v = randn(1000, 1);
  Tensor g = on(*gpu, v, {10, 100}, DType::F32);
  Tensor g2 = Tensor::empty({10, 100}, DType::F32, gpu->allocator());
  gpu->copy(g2, g);
  EXPECT_EQ(read(*gpu, g2), v);
  gpu->fill_zero(g2.rows(2, 3));
  auto r = read(*gpu, g2);
  EXPECT_EQ(r[199], v[199]);
  EXPECT_EQ(r[200], 0.0f);
  EXPECT_EQ(r[499], 0.0f);
  EXPECT_EQ(r[500], v[500]);
  EXPECT_THROW(gpu->copy(g2, on(*gpu, v, {1000}, DType::BF16)), Error);
}

TEST_P(CudaOps, Embedding) {
  const int V = 50, H = 96;
  auto [ct, gt] = both(randn(V * H, 2), {V, H});
  std::vector<int32_t> ids = {3, 0, 49, 7, 7, 12};
  auto [co, go] = empty({6, H});
  cpu->embedding(on_i32(*cpu, ids, {6}), ct, co);
  gpu->embedding(on_i32(*gpu, ids, {6}), gt, go);
  EXPECT_EQ(read(*gpu, go), read(*cpu, co));  // a gather is exact
}

TEST_P(CudaOps, RmsNormAndFusedAdd) {
  const int T = 5, H = 2048;
  auto [cx, gx] = both(randn(T * H, 3), {T, H});
  auto [cw, gw] = both(randn(H, 4, 0.5f), {H});
  auto [cr, gr] = both(randn(T * H, 5), {T, H});
  auto [co, go] = empty({T, H});
  cpu->rms_norm(cx, cw, 1e-5f, co);
  gpu->rms_norm(gx, gw, 1e-5f, go);
  expect_close(co, go);
  cpu->add_rms_norm(cr, cx, cw, 1e-5f, cx);  // x aliases out
  gpu->add_rms_norm(gr, gx, gw, 1e-5f, gx);
  expect_close(cx, gx);
  expect_close(cr, gr);
}

// GEMV for M = 1, cuBLASLt above; bias or not; bf16 or f32 output; odd K takes cuBLASLt.
TEST_P(CudaOps, LinearAllPaths) {
  struct Case {
    int M, N, K;
    bool bias, f32;
  };
  for (const Case c : {Case{1, 256, 512, false, false}, Case{3, 130, 256, true, false}, Case{8, 64, 1024, false, true},
                       Case{17, 200, 96, true, true}, Case{64, 384, 512, false, false}, Case{2, 33, 50, false, false},
                       Case{2, 96, 64, true, true}, Case{1, 1000, 2048, false, true}}) {
    SCOPED_TRACE(testing::Message() << "M=" << c.M << " N=" << c.N << " K=" << c.K);
    auto [cx, gx] = both(randn(size_t(c.M) * c.K, 10 + c.M), {c.M, c.K});
    auto [cw, gw] = both(randn(size_t(c.N) * c.K, 20 + c.N, 0.05f), {c.N, c.K});
    Tensor cb, gb;
    if (c.bias) std::tie(cb, gb) = both(randn(c.N, 30), {c.N});
    auto [cy, gy] = empty({c.M, c.N}, c.f32 ? DType::F32 : dt());
    cpu->linear(cx, cw, cb, cy);
    gpu->linear(gx, gw, gb, gy);
    expect_close(cy, gy);
  }
}

// The fused QKV epilogue, with and without Qwen3's q/k norm, against the CPU reference.
TEST_P(CudaOps, SplitQkvRope) {
  const int T = 5, hq = 6, hkv = 2, D = 128;
  std::vector<int32_t> pos = {0, 3, 100, 2047, 70000};
  RopeConfig cfg;
  cfg.theta = 1000000.0f;
  cfg.head_dim = D;
  for (const auto [qk_norm, llama3_factor] : {std::pair{false, 0.0f}, {true, 0.0f}, {false, 32.0f}}) {
    SCOPED_TRACE(testing::Message() << (qk_norm ? "q/k norm" : "plain") << ", llama3 factor " << llama3_factor);
    cfg.llama3_factor = llama3_factor;
    auto [cx, gx] = both(randn(T * (hq + 2 * hkv) * D, 70), {T, (hq + 2 * hkv) * D});
    auto [cqn, gqn] = both(randn(D, 71), {D});
    auto [ckn, gkn] = both(randn(D, 72), {D});
    auto [cq, gq] = empty({T, hq * D});
    auto [ck, gk] = empty({T, hkv * D});
    auto [cv, gv] = empty({T, hkv * D});
    cpu->split_qkv_rope(cx, on_i32(*cpu, pos, {T}), cfg, qk_norm ? cqn : Tensor(), qk_norm ? ckn : Tensor(), 1e-6f, cq,
                        ck, cv);
    gpu->split_qkv_rope(gx, on_i32(*gpu, pos, {T}), cfg, qk_norm ? gqn : Tensor(), qk_norm ? gkn : Tensor(), 1e-6f, gq,
                        gk, gv);
    expect_close(cq, gq);
    expect_close(ck, gk);
    EXPECT_EQ(read(*gpu, gv), read(*cpu, cv));  // v is a copy
  }
}

TEST_P(CudaOps, SiluMul) {
  const int T = 4, I = 1000;
  auto [cg, gg] = both(randn(T * 2 * I, 50, 2.0f), {T, 2 * I});
  auto [co, go] = empty({T, I});
  cpu->silu_mul(cg, co);
  gpu->silu_mul(gg, go);
  expect_close(co, go);
}

TEST_P(CudaOps, GatherRows) {
  const int T = 9, V = 5003;
  std::vector<float> logits = randn(T * V, 60);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] += 1e-4f * float(i % 97);  // no ties
  Tensor cl = on(*cpu, logits, {T, V}, DType::F32), gl = on(*gpu, logits, {T, V}, DType::F32);
  std::vector<int32_t> idx = {8, 0, 4};
  Tensor cs = Tensor::empty({3, V}, DType::F32, cpu->allocator());
  Tensor gs = Tensor::empty({3, V}, DType::F32, gpu->allocator());
  cpu->gather_rows(cl, on_i32(*cpu, idx, {3}), cs);
  gpu->gather_rows(gl, on_i32(*gpu, idx, {3}), gs);
  EXPECT_EQ(read(*gpu, gs), read(*cpu, cs));
}

TEST_P(CudaOps, BadShapesAreErrors) {
  Tensor x = Tensor::empty({2, 64}, DType::BF16, gpu->allocator());
  Tensor w = Tensor::empty({32, 48}, DType::BF16, gpu->allocator());
  Tensor y = Tensor::empty({2, 32}, DType::BF16, gpu->allocator());
  EXPECT_THROW(gpu->linear(x, w, Tensor(), y), Error);
  // x may be an f32 residual whatever the compute dtype; the weight must be in the compute dtype.
  const DType other = dt() == DType::F32 ? DType::BF16 : DType::F32;
  Tensor xd = Tensor::empty({2, 64}, dt(), gpu->allocator());
  EXPECT_THROW(gpu->rms_norm(xd, Tensor::empty({64}, other, gpu->allocator()), 1e-5f, xd), Error);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaOps, ::testing::Values(DType::BF16, DType::F32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace gs
