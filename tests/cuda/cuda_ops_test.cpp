// Every op of the CUDA backend, in each compute dtype (bf16, f32), against the CPU (fp32)
// backend on random data.
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>

#include "core/error.h"
#include "cuda_test_util.h"
#include "model/weight_source.h"
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

// Dummy weights computed on the GPU equal the host's values (rounded to the compute dtype) for a
// whole tensor, a slice of rows and a slice of columns (tensor-parallel shards), and every init.
TEST_P(CudaOps, DummyWeightsEqualTheHostValues) {
  auto on_gpu = make_dummy_source(11, *gpu);
  auto on_cpu = make_dummy_source(11, *cpu);
  const Shape shape{96, 1000};  // past one grid-stride pass of a small grid, odd row length
  const auto check = [&](WeightInit init, const WeightSlice& slice) {
    const Shape part = slice.shape_of(shape);
    Tensor g = Tensor::empty(part, dt(), gpu->allocator());
    Tensor c = Tensor::empty(part, DType::F32, cpu->allocator());
    on_gpu->load("layers.0.w", shape, g, init, 1000, slice);
    on_cpu->load("layers.0.w", shape, c, init, 1000, slice);
    std::vector<float> want(c.data_as<float>(), c.data_as<float>() + c.numel());
    if (dt() == DType::BF16)
      for (float& v : want) v = bf16_to_f32(f32_to_bf16(v));
    EXPECT_EQ(read(*gpu, g), want) << "slice dim " << slice.dim << " [" << slice.begin << ", +" << slice.count << ")";
  };
  check(WeightInit::Uniform, {});
  check(WeightInit::Uniform, {0, 48, 32});
  check(WeightInit::Uniform, {1, 500, 250});
  check(WeightInit::Ones, {1, 0, 500});
  check(WeightInit::Zeros, {});
}

// A host [3, 2] table into the leading columns of a device [3, 5] one (the runner's block table
// upload); the other columns keep their contents.
TEST_P(CudaOps, CopyLeadingColumns) {
  std::vector<int32_t> init(15), cols{1, 2, 3, 4, 5, 6};
  for (int i = 0; i < 15; ++i) init[size_t(i)] = 100 + i;
  auto host = [](std::vector<int32_t>& v, Shape s) { return Tensor::wrap(v.data(), s, DType::I32, Device::cpu()); };
  Tensor dst = Tensor::empty({3, 5}, DType::I32, gpu->allocator());
  gpu->copy(dst, host(init, {3, 5}));
  gpu->copy_leading_columns(dst, host(cols, {3, 2}));
  std::vector<int32_t> got(15);
  gpu->copy(host(got, {3, 5}), dst);
  gpu->stream().synchronize();
  EXPECT_EQ(got, (std::vector<int32_t>{1, 2, 102, 103, 104, 3, 4, 107, 108, 109, 5, 6, 112, 113, 114}));
  EXPECT_THROW(gpu->copy_leading_columns(dst, host(init, {3, 5}).reshape({5, 3})), Error);
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

// H 2048, 576 and 8200 take the vector kernel (one and two chunks per thread), 100 the scalar
// one; the residual in the compute dtype and in f32 (the model's residual stream).
TEST_P(CudaOps, RmsNormAndFusedAdd) {
  const int T = 5;
  for (int H : {2048, 576, 8200, 100}) {
    for (bool f32_residual : {false, true}) {
      SCOPED_TRACE(testing::Message() << "H=" << H << (f32_residual ? " f32 residual" : ""));
      auto [cx, gx] = both(randn(T * H, 3), {T, H});
      auto [cw, gw] = both(randn(H, 4, 0.5f), {H});
      const auto r = randn(T * H, 5);
      Tensor cr = on(*cpu, r, {T, H}, DType::F32), gr = on(*gpu, r, {T, H}, f32_residual ? DType::F32 : dt());
      auto [co, go] = empty({T, H});
      cpu->rms_norm(cr, cw, 1e-5f, co);
      gpu->rms_norm(gr, gw, 1e-5f, go);  // x is the residual itself
      expect_close(co, go);
      cpu->add_rms_norm(cr, cx, cw, 1e-5f, cx);  // x aliases out
      gpu->add_rms_norm(gr, gx, gw, 1e-5f, gx);
      expect_close(cx, gx);
      expect_close(cr, gr);
    }
  }
}

// GEMV for M = 1 (K split over 2 or 4 warps per output from K = 2048 at N < 4096, odd N
// included), cuBLASLt above; bias or not; bf16 or f32 output; odd K takes cuBLASLt.
TEST_P(CudaOps, LinearAllPaths) {
  struct Case {
    int M, N, K;
    bool bias, f32;
  };
  for (const Case c : {Case{1, 256, 512, false, false}, Case{3, 130, 256, true, false}, Case{8, 64, 1024, false, true},
                       Case{17, 200, 96, true, true}, Case{64, 384, 512, false, false}, Case{2, 33, 50, false, false},
                       Case{2, 96, 64, true, true}, Case{1, 1000, 2048, false, true}, Case{1, 1001, 2048, true, false},
                       Case{1, 2049, 8192, false, false}, Case{1, 77, 576, true, false}}) {
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
// Shapes of the vector kernel (D 64, 128, 256 with 1B / Qwen3 head counts; odd head counts
// whose threads per token are not a whole number of warps) and of the scalar one (D 96).
TEST_P(CudaOps, SplitQkvRope) {
  struct Case {
    int T, hq, hkv, D;
  };
  RopeConfig cfg;
  cfg.theta = 1000000.0f;
  for (const Case c :
       {Case{5, 6, 2, 128}, Case{37, 32, 8, 64}, Case{9, 14, 2, 64}, Case{3, 4, 1, 256}, Case{4, 5, 1, 96}}) {
    const int T = c.T, hq = c.hq, hkv = c.hkv, D = c.D;
    cfg.head_dim = D;
    std::vector<int32_t> pos(static_cast<size_t>(T));
    for (int t = 0; t < T; ++t) pos[size_t(t)] = (t * 7919) % 70001;
    for (const auto& [qk_norm, llama3_factor] : {std::pair{false, 0.0f}, {true, 0.0f}, {false, 32.0f}}) {
      SCOPED_TRACE(testing::Message() << "T=" << T << " hq=" << hq << " hkv=" << hkv << " D=" << D
                                      << (qk_norm ? " q/k norm" : " plain") << " llama3 factor " << llama3_factor);
      cfg.llama3_factor = llama3_factor;
      auto [cx, gx] = both(randn(T * (hq + 2 * hkv) * D, 70), {T, (hq + 2 * hkv) * D});
      auto [cqn, gqn] = both(randn(D, 71), {D});
      auto [ckn, gkn] = both(randn(D, 72), {D});
      auto [cq, gq] = empty({T, hq * D});
      auto [ck, gk] = empty({T, hkv * D});
      auto [cv, gv] = empty({T, hkv * D});
      cpu->split_qkv_rope(cx, on_i32(*cpu, pos, {T}), cfg, qk_norm ? cqn : Tensor(), qk_norm ? ckn : Tensor(), 1e-6f,
                          cq, ck, cv);
      gpu->split_qkv_rope(gx, on_i32(*gpu, pos, {T}), cfg, qk_norm ? gqn : Tensor(), qk_norm ? gkn : Tensor(), 1e-6f,
                          gq, gk, gv);
      expect_close(cq, gq);
      expect_close(ck, gk);
      EXPECT_EQ(read(*gpu, gv), read(*cpu, cv));  // v is a copy
    }
  }
}

// Both activations; I % 8 == 0 takes the 16-byte vector kernel, I = 1000 + 4 the scalar one.
TEST_P(CudaOps, GatedActivation) {
  const int T = 7;
  for (GatedActivation act : {GatedActivation::Silu, GatedActivation::GeluTanh}) {
    for (int I : {1000, 1004, 8192}) {
      SCOPED_TRACE(testing::Message() << "I=" << I << (act == GatedActivation::Silu ? " silu" : " gelu_tanh"));
      auto [cg, gg] = both(randn(T * 2 * I, 50 + I, 2.0f), {T, 2 * I});
      auto [co, go] = empty({T, I});
      cpu->gated_activation(act, cg, co);
      gpu->gated_activation(act, gg, go);
      expect_close(co, go);
    }
  }
}

// The QKV GEMV with the RoPE epilogue at M = 1 (with and without bias; on K >= 1024 in wide
// blocks of 16 and, 3072 rotary pairs, 32 warps, and with 3584 pairs, too many for one wave of them
// on a GPU of 132 SMs, or shorter rows, K split over 4-warp blocks), and the linear +
// split_qkv_rope path (M = 3; q/k norm) against the CPU.
TEST_P(CudaOps, LinearSplitQkvRope) {
  struct Case {
    int M, hq, hkv, D, K;
    bool bias, qk_norm;
  };
  RopeConfig cfg;
  cfg.theta = 500000.0f;
  for (const Case c : {Case{1, 32, 8, 64, 512, false, false}, Case{1, 6, 2, 128, 264, true, false},
                       Case{3, 4, 2, 64, 256, true, false}, Case{1, 4, 2, 64, 256, false, true},
                       Case{1, 8, 2, 64, 2048, true, false}, Case{1, 16, 8, 128, 1024, true, true},
                       Case{1, 32, 8, 128, 1024, true, false}, Case{1, 40, 8, 128, 2048, true, false}}) {
    SCOPED_TRACE(testing::Message() << "M=" << c.M << " hq=" << c.hq << " D=" << c.D << " bias=" << c.bias
                                    << " qk_norm=" << c.qk_norm);
    cfg.head_dim = c.D;
    const int W = (c.hq + 2 * c.hkv) * c.D;
    std::vector<int32_t> pos;
    for (int m = 0; m < c.M; ++m) pos.push_back(1000 + 977 * m);
    auto [cx, gx] = both(randn(size_t(c.M) * c.K, 90 + c.M), {c.M, c.K});
    auto [cw, gw] = both(randn(size_t(W) * c.K, 91, 0.05f), {W, c.K});
    Tensor cb, gb, cqn, gqn, ckn, gkn;
    if (c.bias) std::tie(cb, gb) = both(randn(W, 92), {W});
    if (c.qk_norm) std::tie(cqn, gqn) = both(randn(c.D, 93), {c.D}), std::tie(ckn, gkn) = both(randn(c.D, 94), {c.D});
    auto [cs, gs] = empty({c.M, W});
    auto [cq, gq] = empty({c.M, c.hq * c.D});
    auto [ck, gk] = empty({c.M, c.hkv * c.D});
    auto [cv, gv] = empty({c.M, c.hkv * c.D});
    cpu->linear({.x = cx,
                 .w = cw,
                 .bias = cb,
                 .y = cs,
                 .then = SplitQkvRope{on_i32(*cpu, pos, {c.M}), &cfg, cqn, ckn, 1e-6f, cq, ck, cv}});
    gpu->linear({.x = gx,
                 .w = gw,
                 .bias = gb,
                 .y = gs,
                 .then = SplitQkvRope{on_i32(*gpu, pos, {c.M}), &cfg, gqn, gkn, 1e-6f, gq, gk, gv}});
    expect_close(cq, gq);
    expect_close(ck, gk);
    expect_close(cv, gv);
  }
}

// The gated GEMV at M = 1 (gate and up rows in one warp, activation in the epilogue) and the
// linear + gated_activation path above, both activations.
TEST_P(CudaOps, LinearGatedActivation) {
  struct Case {
    int M, I, K;
  };
  for (GatedActivation act : {GatedActivation::Silu, GatedActivation::GeluTanh}) {
    for (const Case c : {Case{1, 1000, 2048}, Case{1, 96, 136}, Case{3, 256, 512}}) {
      SCOPED_TRACE(testing::Message() << "M=" << c.M << " I=" << c.I << " K=" << c.K);
      auto [cx, gx] = both(randn(size_t(c.M) * c.K, 80 + c.M), {c.M, c.K});
      auto [cw, gw] = both(randn(size_t(2 * c.I) * c.K, 81, 0.05f), {2 * c.I, c.K});
      auto [cs, gs] = empty({c.M, 2 * c.I});
      auto [co, go] = empty({c.M, c.I});
      cpu->linear({.x = cx, .w = cw, .y = cs, .then = Gated{act, co}});
      gpu->linear({.x = gx, .w = gw, .y = gs, .then = Gated{act, go}});
      expect_close(co, go);
    }
  }
}

// The deferred norm at one token: an AddRmsNorm epilogue adds o_proj / down's output into the f32
// residual in the GEMV (the same residual, bit for bit, as linear + add_rms_norm), and the gated /
// QKV projection after it computes the norm itself (within rounding of rms_norm + projection);
// from two tokens the backend does not defer.
TEST_P(CudaOps, DeferredNormMatchesAddNormThenProjection) {
  ASSERT_TRUE(gpu->defers_norm(1));
  EXPECT_FALSE(gpu->defers_norm(2));
  EXPECT_FALSE(cpu->defers_norm(1));
  const float eps = 1e-5f;
  struct Case {
    int H, Kin, I;  // residual width, the adding projection's input, the gated MLP's width
  };
  for (const Case c : {Case{2048, 8192, 1000}, Case{512, 2048, 4096}, Case{136, 264, 96}}) {
    SCOPED_TRACE(testing::Message() << "H=" << c.H << " Kin=" << c.Kin << " I=" << c.I);
    auto [cx, gx] = both(randn(size_t(c.Kin), 70), {1, c.Kin});
    auto [cwo, gwo] = both(randn(size_t(c.H) * c.Kin, 71, 0.05f), {c.H, c.Kin});
    auto [cg, gg] = both(randn(size_t(c.H), 72), {c.H});
    const auto r0 = randn(size_t(c.H), 73);
    Tensor cr = on(*cpu, r0, {1, c.H}, DType::F32), gr = on(*gpu, r0, {1, c.H}, DType::F32);
    Tensor gr_plain = on(*gpu, r0, {1, c.H}, DType::F32);
    auto [cy, gy] = empty({1, c.H});
    auto [cn, gn] = empty({1, c.H});
    cpu->linear({.x = cx, .w = cwo, .y = cy, .then = AddRmsNorm{cr, cg, eps, cn}});
    gpu->linear({.x = gx, .w = gwo, .y = gy, .then = AddRmsNorm{gr, gg, eps, gn}});
    gpu->linear(gx, gwo, Tensor(), gy);
    gpu->add_rms_norm(gr_plain, gy, gg, eps, gn);
    EXPECT_EQ(read(*gpu, gr), read(*gpu, gr_plain));
    expect_close(cr, gr);
    for (GatedActivation act : {GatedActivation::Silu, GatedActivation::GeluTanh}) {
      auto [cw, gw] = both(randn(size_t(2 * c.I) * c.H, 74, 0.05f), {2 * c.I, c.H});
      auto [cs, gs] = empty({1, 2 * c.I});
      auto [co, go] = empty({1, c.I});
      cpu->linear({.x = cn, .norm = RmsNormInput{cr, cg, eps}, .w = cw, .y = cs, .then = Gated{act, co}});
      gpu->linear({.x = gn, .norm = RmsNormInput{gr, gg, eps}, .w = gw, .y = gs, .then = Gated{act, go}});
      expect_close(co, go);
    }
    // Head dims 64 and 128: the q/k norm's clusters of 4 and 8 GEMV blocks a head.
    for (int D : {64, 128}) {
      RopeConfig cfg;
      cfg.head_dim = D;
      const int hq = 4, hkv = 2, W = (hq + 2 * hkv) * D;
      auto [cw, gw] = both(randn(size_t(W) * c.H, 75, 0.05f), {W, c.H});
      auto [cqn, gqn] = both(randn(D, 76), {D});
      auto [ckn, gkn] = both(randn(D, 77), {D});
      for (bool qk_norm : {false, true}) {
        SCOPED_TRACE(testing::Message() << "D=" << D << (qk_norm ? " q/k norm" : " RoPE epilogue"));
        auto [cs, gs] = empty({1, W});
        auto [cq, gq] = empty({1, hq * D});
        auto [ck, gk] = empty({1, hkv * D});
        auto [cv, gv] = empty({1, hkv * D});
        const std::vector<int32_t> pos = {1234};
        cpu->linear({.x = cn,
                     .norm = RmsNormInput{cr, cg, eps},
                     .w = cw,
                     .y = cs,
                     .then = SplitQkvRope{on_i32(*cpu, pos, {1}), &cfg, qk_norm ? cqn : Tensor(),
                                          qk_norm ? ckn : Tensor(), eps, cq, ck, cv}});
        gpu->linear({.x = gn,
                     .norm = RmsNormInput{gr, gg, eps},
                     .w = gw,
                     .y = gs,
                     .then = SplitQkvRope{on_i32(*gpu, pos, {1}), &cfg, qk_norm ? gqn : Tensor(),
                                          qk_norm ? gkn : Tensor(), eps, gq, gk, gv}});
        expect_close(cq, gq);
        expect_close(ck, gk);
        expect_close(cv, gv);
      }
    }
  }
}

// The norm handoff at one token (LinearKernelOptions::norm_handoff_min_k / max_k, here at every
// K): the residual add stores x = residual * norm_w for the gated or QKV projection enqueued right
// after it, which reads that x and only the residual's squares. The residual is the same bit for
// bit as without the handoff; the outputs equal the norm in the kernel within x's rounding (in bf16
// they differ, which shows the handoff ran) and the CPU reference. The shapes take the split-K and
// unsplit GEMVs, the wide QKV blocks (K >= 1024) and the q/k head norm's clusters.
TEST_P(CudaOps, NormHandoffMatchesTheNormInTheKernel) {
  KernelOptions every_k, off;
  every_k.linear.norm_handoff_min_k = 0;
  every_k.linear.norm_handoff_max_k = 1 << 30;
  off.linear.norm_handoff_max_k = 0;
  const auto handoff = make_cuda_backend(0, dt(), every_k), plain = make_cuda_backend(0, dt(), off);
  const float eps = 1e-5f;
  struct Case {
    int H, Kin, I;  // residual width, the adding projection's input, the gated MLP's width
  };
  for (const Case c : {Case{2048, 8192, 1000}, Case{896, 4864, 4864}, Case{136, 264, 96}}) {
    const auto x0 = randn(size_t(c.Kin), 80), wo0 = randn(size_t(c.H) * c.Kin, 81, 0.05f);
    const auto g0 = randn(size_t(c.H), 82), r0 = randn(size_t(c.H), 83);
    // The residual add into a fresh residual, then `consume` on its norm, on backend be.
    const auto run = [&](Backend& be, const std::function<void(const RmsNormInput&, const Tensor&)>& consume) {
      const DType d = &be == cpu.get() ? DType::F32 : dt();
      const Tensor x = on(be, x0, {1, c.Kin}, d), wo = on(be, wo0, {c.H, c.Kin}, d), g = on(be, g0, {c.H}, d);
      const Tensor r = on(be, r0, {1, c.H}, DType::F32), y = Tensor::empty({1, c.H}, d, be.allocator()),
                   n = Tensor::empty({1, c.H}, d, be.allocator());
      be.linear({.x = x, .w = wo, .y = y, .then = AddRmsNorm{r, g, eps, n}});
      consume(RmsNormInput{r, g, eps}, n);
      return r;
    };
    // q | k | v or the activation of each backend, and their residuals.
    const auto each = [&](const std::function<std::vector<Tensor>(Backend&)>& f) {
      return std::vector<std::vector<Tensor>>{f(*handoff), f(*plain), f(*cpu)};
    };
    const auto check = [&](const std::vector<std::vector<Tensor>>& got) {
      for (size_t i = 0; i < got[0].size(); ++i) {
        const auto h = read(*handoff, got[0][i]), p = read(*plain, got[1][i]), ref = read(*cpu, got[2][i]);
        if (i == 0) {  // the residual
          EXPECT_EQ(h, p);
          continue;
        }
        EXPECT_LT(rel_l2(h, p), dt() == DType::F32 ? 1e-5 : 5e-3) << "output " << i;
        EXPECT_LT(rel_l2(h, ref), tol()) << "output " << i;
        if (dt() == DType::BF16) {
          EXPECT_NE(h, p) << "output " << i << ": the handoff did not run";
        }
      }
    };
    SCOPED_TRACE(testing::Message() << "H=" << c.H << " Kin=" << c.Kin << " I=" << c.I);
    const auto wg0 = randn(size_t(2 * c.I) * c.H, 84, 0.05f);
    check(each([&](Backend& be) {
      const DType d = &be == cpu.get() ? DType::F32 : dt();
      const Tensor wg = on(be, wg0, {2 * c.I, c.H}, d), act = Tensor::empty({1, c.I}, d, be.allocator());
      const Tensor r = run(be, [&](const RmsNormInput& norm, const Tensor& n) {
        be.linear({.x = n,
                   .norm = norm,
                   .w = wg,
                   .y = Tensor::empty({1, 2 * c.I}, d, be.allocator()),
                   .then = Gated{GatedActivation::Silu, act}});
      });
      be.stream().synchronize();
      return std::vector<Tensor>{r, act};
    }));
    for (int D : {64, 128}) {
      for (bool qk_norm : {false, true}) {
        SCOPED_TRACE(testing::Message() << "D=" << D << (qk_norm ? " q/k norm" : " RoPE epilogue"));
        RopeConfig cfg;
        cfg.head_dim = D;
        const int hq = 4, hkv = 2, W = (hq + 2 * hkv) * D;
        const auto wq0 = randn(size_t(W) * c.H, 85, 0.05f), qn0 = randn(D, 86), kn0 = randn(D, 87);
        check(each([&](Backend& be) {
          const DType d = &be == cpu.get() ? DType::F32 : dt();
          const Tensor wq = on(be, wq0, {W, c.H}, d), q = Tensor::empty({1, hq * D}, d, be.allocator()),
                       k = Tensor::empty({1, hkv * D}, d, be.allocator()),
                       v = Tensor::empty({1, hkv * D}, d, be.allocator());
          const Tensor qn = qk_norm ? on(be, qn0, {D}, d) : Tensor(), kn = qk_norm ? on(be, kn0, {D}, d) : Tensor();
          const Tensor pos = on_i32(be, std::vector<int32_t>{1234}, {1});
          const Tensor r = run(be, [&](const RmsNormInput& norm, const Tensor& n) {
            be.linear({.x = n,
                       .norm = norm,
                       .w = wq,
                       .y = Tensor::empty({1, W}, d, be.allocator()),
                       .then = SplitQkvRope{pos, &cfg, qn, kn, eps, q, k, v}});
          });
          be.stream().synchronize();
          return std::vector<Tensor>{r, q, k, v};
        }));
      }
    }
  }
}

// A plain projection whose norm later ops read (RmsNormInput::keep_x: the router before the
// experts): at one token the GEMV norms the residual as it streams and its blocks store the normed
// row, a share each; x then equals rms_norm's output and y the projection of it (f32, with a bias),
// for a K split in 4, 2 and none (the GEMV's forms) and as many experts as Mixtral and Qwen3-MoE
// have, against rms_norm's own row; from two tokens the norm runs first.
TEST_P(CudaOps, ProjectionKeepingItsNormStoresTheNormedRow) {
  const float eps = 1e-6f;
  for (const int H : {4096, 2048, 136})
    for (const int N : {128, 8})
      for (const int M : {1, 2}) {
        SCOPED_TRACE(testing::Message() << "H=" << H << " N=" << N << " M=" << M);
        const auto r0 = randn(size_t(M) * H, 90);
        Tensor cr = on(*cpu, r0, {M, H}, DType::F32), gr = on(*gpu, r0, {M, H}, DType::F32);
        auto [cg, gg] = both(randn(size_t(H), 91), {H});
        auto [cw, gw] = both(randn(size_t(N) * H, 92, 0.05f), {N, H});
        auto [cb, gb] = both(randn(size_t(N), 93), {N});
        auto [cx, gx] = empty({M, H});
        gpu->fill_zero(gx);
        auto [cy, gy] = empty({M, N}, DType::F32);
        cpu->linear({.x = cx, .norm = RmsNormInput{cr, cg, eps, true}, .w = cw, .bias = cb, .y = cy});
        gpu->linear({.x = gx, .norm = RmsNormInput{gr, gg, eps, true}, .w = gw, .bias = gb, .y = gy});
        expect_close(cx, gx);
        expect_close(cy, gy);
        Tensor gx_plain = Tensor::empty({M, H}, dt(), gpu->allocator());
        gpu->rms_norm(gr, gg, eps, gx_plain);
        // The GEMV sums the squares in its own order: 1 / rms within an ulp of rms_norm's.
        EXPECT_LT(rel_l2(read(*gpu, gx), read(*gpu, gx_plain)), dt() == DType::F32 ? 1e-6 : 1e-3);
      }
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
