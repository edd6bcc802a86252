// The skinny tensor-core GEMM (ops/cuda/skinny_gemm.h) launched directly over every token tile
// (M = 2..128, odd M, partial weight tiles, K split over 1..8 warps) against a float64 host
// reference and cuBLASLt; its determinism; and its gated and QKV + RoPE epilogues against the
// unfused kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "cuda_test_util.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/lt_gemm.h"
#include "ops/cuda/skinny_gemm.h"
#include "ops/gated_activation.h"

namespace gs {
namespace {

using namespace test;  // cuda_test_util.h
using cuda::bf16_t;

// y[m, n] = x[m] . w[n] (+ bias[n]) in float64 for the rows m < M of the host data.
std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& bias,
                              int M, int N, int K) {
  std::vector<double> y(size_t(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double acc = bias.empty() ? 0.0 : bias[size_t(n)];
      const float* xr = &x[size_t(m) * K];
      const float* wr = &w[size_t(n) * K];
      for (int k = 0; k < K; ++k) acc += double(xr[k]) * double(wr[k]);
      y[size_t(m) * N + n] = acc;
    }
  return y;
}

double rel_l2_ref(const std::vector<float>& got, const std::vector<double>& ref) {
  std::vector<float> r(ref.begin(), ref.end());
  return rel_l2(got, r);
}

// The share of elements whose values differ.
double differing(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  size_t n = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) n += a[i] != b[i];
  return a.empty() ? 0.0 : double(n) / double(a.size());
}

class SkinnyGemm : public ::testing::Test {
 protected:
  void SetUp() override {
    GS_REQUIRE_GPU();
    gpu = make_cuda_backend(0, DType::BF16);
    s = dynamic_cast<CudaStream&>(gpu->stream()).handle();
  }
  Tensor bf16(const std::vector<float>& v, const Shape& shape) { return on(*gpu, v, shape, DType::BF16); }
  Tensor empty(const Shape& shape, DType d = DType::BF16) { return Tensor::empty(shape, d, gpu->allocator()); }
  // The skinny GEMM's y (bf16 or f32) for x [M, K], w [N, K].
  std::vector<float> skinny(const Tensor& x, const Tensor& w, const Tensor& bias, bool f32, int M, int N, int K) {
    Tensor y = empty({M, N}, f32 ? DType::F32 : DType::BF16);
    GS_CUDA_CHECK(cuda::skinny_gemm(static_cast<const bf16_t*>(x.data()), static_cast<const bf16_t*>(w.data()),
                                    bias.defined() ? static_cast<const bf16_t*>(bias.data()) : nullptr, y.data(), f32,
                                    M, N, K, s));
    return read(*gpu, y);
  }
  std::unique_ptr<Backend> gpu;
  cudaStream_t s = nullptr;
};

// Every token tile (16, 32, 64, 128) with odd M, N not a multiple of the weight tile, bias and
// f32 out; large shapes of the decode step (K split over 2..8 warps) at fewer M (the
// float64 reference is slow), all of them also against cuBLASLt.
TEST_F(SkinnyGemm, MatchesFloat64AndCublasLt) {
  struct Case {
    int N, K;
    std::vector<int> Ms;
  };
  LtGemm lt(gpu->allocator());
  const std::vector<int> all_m = {2, 3, 7, 16, 17, 31, 32, 33, 64, 65, 100, 128};
  for (const Case& c : {Case{200, 192, all_m}, Case{64, 4096, all_m}, Case{2048, 2048, {5, 64}}, Case{3072, 2048, {32}},
                        Case{2048, 8192, {3, 40}}, Case{1000, 2048, {128}}}) {
    auto hw = randn(size_t(c.N) * c.K, uint32_t(c.N + c.K), 0.05f);
    auto hb = randn(size_t(c.N), 7);
    Tensor w = bf16(hw, {c.N, c.K}), b = bf16(hb, {c.N});
    for (int M : c.Ms) {
      for (bool f32 : {false, true}) {
        const bool with_bias = (M + int(f32)) % 2 == 0;
        SCOPED_TRACE(testing::Message() << "M=" << M << " N=" << c.N << " K=" << c.K << " f32=" << f32
                                        << " bias=" << with_bias);
        auto hx = randn(size_t(M) * c.K, uint32_t(M));
        Tensor x = bf16(hx, {M, c.K});
        const std::vector<float> got = skinny(x, w, with_bias ? b : Tensor(), f32, M, c.N, c.K);
        EXPECT_LT(rel_l2_ref(got, reference(hx, hw, with_bias ? hb : std::vector<float>{}, M, c.N, c.K)),
                  f32 ? 1e-5 : 5e-3);
        if (with_bias) continue;  // cuBLASLt adds no bias
        Tensor ly = empty({M, c.N}, f32 ? DType::F32 : DType::BF16);
        lt.matmul(x.data(), w.data(), ly.data(), false, f32, M, c.N, c.K, s);
        EXPECT_LT(rel_l2(got, read(*gpu, ly)), f32 ? 1e-5 : 5e-3);
      }
    }
  }
}

// Identical bits run to run (the split-K partials are summed in a fixed order), and a token's row
// does not depend on how many other rows share its token tile (graph padding changes M only).
TEST_F(SkinnyGemm, DeterministicAndRowIndependent) {
  const int N = 2048, K = 8192;
  Tensor w = bf16(randn(size_t(N) * K, 3, 0.05f), {N, K});
  for (auto [small, large] : {std::pair{2, 16}, {17, 32}, {40, 64}, {65, 128}}) {
    SCOPED_TRACE(testing::Message() << "M=" << small << " and " << large);
    auto hx = randn(size_t(large) * K, 4);
    Tensor x = bf16(hx, {large, K});
    const std::vector<float> a = skinny(x, w, Tensor(), true, large, N, K);
    const std::vector<float> b = skinny(x, w, Tensor(), true, large, N, K);
    EXPECT_EQ(a, b);
    const std::vector<float> c = skinny(x, w, Tensor(), true, small, N, K);
    EXPECT_EQ(std::vector<float>(a.begin(), a.begin() + size_t(small) * N), c);
  }
}

// The gated epilogue against act(g) * u of the plain skinny GEMM's f32 gate and up outputs, and
// against its bf16 outputs through the gated_activation kernel: the same values (the epilogue
// rounds g and u to bf16 first; < 1% of the elements may differ by FMA contraction).
TEST_F(SkinnyGemm, GatedEpilogue) {
  for (GatedActivation act : {GatedActivation::Silu, GatedActivation::GeluTanh}) {
    for (auto [M, I, K] : {std::tuple{2, 1000, 512}, {33, 8192, 2048}, {64, 96, 4096}, {128, 512, 256}}) {
      SCOPED_TRACE(testing::Message() << "M=" << M << " I=" << I << " K=" << K << " act=" << int(act));
      Tensor w = bf16(randn(size_t(2 * I) * K, 5, 0.05f), {2 * I, K});
      Tensor x = bf16(randn(size_t(M) * K, 6), {M, K});
      const std::vector<float> gu = skinny(x, w, Tensor(), true, M, 2 * I, K);
      std::vector<float> want(size_t(M) * I);
      for (int m = 0; m < M; ++m)
        for (int i = 0; i < I; ++i) {
          const float g = gu[size_t(m) * 2 * I + i], u = gu[size_t(m) * 2 * I + I + i];
          want[size_t(m) * I + i] = act == GatedActivation::Silu ? gated_act<GatedActivation::Silu>(g, u)
                                                                 : gated_act<GatedActivation::GeluTanh>(g, u);
        }
      Tensor out = empty({M, I});
      GS_CUDA_CHECK(cuda::skinny_gemm_gated(act, static_cast<const bf16_t*>(x.data()),
                                            static_cast<const bf16_t*>(w.data()), static_cast<bf16_t*>(out.data()), M,
                                            I, K, s));
      const std::vector<float> fused = read(*gpu, out);
      EXPECT_LT(rel_l2(fused, want), 5e-3);
      Tensor gu16 = empty({M, 2 * I}), unfused = empty({M, I});
      GS_CUDA_CHECK(cuda::skinny_gemm(static_cast<const bf16_t*>(x.data()), static_cast<const bf16_t*>(w.data()),
                                      nullptr, gu16.data(), false, M, 2 * I, K, s));
      gpu->gated_activation(act, gu16, unfused);
      EXPECT_LT(differing(fused, read(*gpu, unfused)), 0.01);
    }
  }
}

// The QKV + RoPE epilogue (1B and 8B head shapes, per-token positions, bias) against the plain
// skinny GEMM followed by the split_qkv_rope kernel: the same values (< 1% of the elements may
// differ by FMA contraction), and close to cuBLASLt's (backend linear past its skinny limits).
TEST_F(SkinnyGemm, QkvRopeEpilogue) {
  LtGemm lt_gemm(gpu->allocator());
  RopeConfig cfg;
  cfg.theta = 500000.0f;
  for (auto [M, hq, hkv, D, K] :
       {std::tuple{2, 32, 8, 64, 2048}, {17, 32, 8, 64, 2048}, {64, 32, 8, 128, 4096}, {100, 4, 2, 64, 256}}) {
    SCOPED_TRACE(testing::Message() << "M=" << M << " hq=" << hq << " hkv=" << hkv << " D=" << D);
    cfg.head_dim = D;
    const int W = (hq + 2 * hkv) * D;
    Tensor w = bf16(randn(size_t(W) * K, 8, 0.05f), {W, K}), b = bf16(randn(size_t(W), 9), {W});
    Tensor x = bf16(randn(size_t(M) * K, 10), {M, K});
    std::vector<int32_t> pos;
    for (int m = 0; m < M; ++m) pos.push_back(3 + 517 * m);
    Tensor p = on_i32(*gpu, pos, {M});
    Tensor qkv = empty({M, W}), q = empty({M, hq * D}), k = empty({M, hkv * D}), v = empty({M, hkv * D});
    const auto bp = [](const Tensor& t) { return static_cast<bf16_t*>(t.data()); };
    const auto unfused = [&](bool skinny_gemm) {
      if (skinny_gemm) {
        GS_CUDA_CHECK(cuda::skinny_gemm(bp(x), bp(w), bp(b), qkv.data(), false, M, W, K, s));
      } else {
        lt_gemm.matmul(x.data(), w.data(), qkv.data(), false, false, M, W, K, s);
        GS_CUDA_CHECK(cuda::add_bias<bf16_t>(qkv.data(), false, bp(b), M, W, s));
      }
      gpu->split_qkv_rope(qkv, p, cfg, Tensor(), Tensor(), 1e-6f, q, k, v);
      return std::vector<std::vector<float>>{read(*gpu, q), read(*gpu, k), read(*gpu, v)};
    };
    const auto lt = unfused(false), ref = unfused(true);
    gpu->fill_zero(q), gpu->fill_zero(k), gpu->fill_zero(v);
    const std::vector<float> inv = rope_inv_freq(cfg);
    Tensor ti = on(*gpu, inv, {int64_t(inv.size())}, DType::F32);
    GS_CUDA_CHECK(cuda::skinny_gemm_qkv_rope(bp(x), bp(w), bp(b), static_cast<const int32_t*>(p.data()),
                                             static_cast<const float*>(ti.data()), bp(q), bp(k), bp(v), M, hq, hkv, D,
                                             K, cfg.long_from, s));
    const std::vector<std::vector<float>> fused = {read(*gpu, q), read(*gpu, k), read(*gpu, v)};
    for (size_t i = 0; i < 3; ++i) {
      const char* name = i == 0 ? "q" : i == 1 ? "k" : "v";
      EXPECT_LT(differing(fused[i], ref[i]), 0.01) << name;
      EXPECT_LT(rel_l2(fused[i], lt[i]), 1e-2) << name;
    }
  }
}

TEST_F(SkinnyGemm, RejectsUnsupportedShapes) {
  Tensor x = empty({4, 128}), w = empty({64, 128}), y = empty({4, 64});
  const auto run = [&](int M, int K) {
    return cuda::skinny_gemm(static_cast<const bf16_t*>(x.data()), static_cast<const bf16_t*>(w.data()), nullptr,
                             y.data(), false, M, 64, K, s);
  };
  EXPECT_EQ(run(1, 128), cudaErrorInvalidValue);
  EXPECT_EQ(run(129, 128), cudaErrorInvalidValue);
  EXPECT_EQ(run(4, 100), cudaErrorInvalidValue);
  EXPECT_EQ(run(4, 128), cudaSuccess);
  EXPECT_TRUE(cuda::skinny_supported(4, 64, 128, x.data(), w.data()));
  EXPECT_FALSE(cuda::skinny_supported(1, 64, 128, x.data(), w.data()));  // one token: the GEMV's
  // Up to kSkinnyTokens tokens on weights up to kSkinnyMaxWeights; up to kSkinnySmallTokens on
  // small weights (up to kSkinnySmallWeights elements).
  const int64_t big_rows = cuda::kSkinnySmallWeights / 128 + 1;
  EXPECT_TRUE(cuda::skinny_supported(cuda::kSkinnyTokens, big_rows, 128, x.data(), w.data()));
  EXPECT_TRUE(cuda::skinny_supported(cuda::kSkinnySmallTokens, 64, 128, x.data(), w.data()));
  EXPECT_FALSE(cuda::skinny_supported(cuda::kSkinnySmallTokens + 1, 64, 128, x.data(), w.data()));
  EXPECT_FALSE(cuda::skinny_supported(cuda::kSkinnySmallTokens, big_rows, 128, x.data(), w.data()));
  EXPECT_FALSE(cuda::skinny_supported(4, 64, 100, x.data(), w.data()));
  EXPECT_FALSE(cuda::skinny_supported(4, cuda::kSkinnyMaxWeights / 128 + 1, 128, x.data(), w.data()));
  gpu->stream().synchronize();
}

}  // namespace
}  // namespace gs
