// Each CPU op against a straightforward reference on random data, and a captured graph of ops
// replaying against new buffer contents.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>

#include "core/error.h"
#include "ops/backend.h"

namespace gs {
namespace {

class CpuOps : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = make_cpu_backend();
  std::mt19937 rng{42};

  Tensor rand(const Shape& s, float scale = 1.0f) {
    Tensor t = Tensor::empty(s, DType::F32, be->allocator());
    std::normal_distribution<float> d(0.0f, scale);
    for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = d(rng);
    return t;
  }
  Tensor ints(std::vector<int> v) {
    Tensor t = Tensor::empty({int64_t(v.size())}, DType::I32, be->allocator());
    std::copy(v.begin(), v.end(), t.data_as<int>());
    return t;
  }
  Tensor zeros(const Shape& s, DType dt = DType::F32) {
    Tensor t = Tensor::empty(s, dt, be->allocator());
    std::fill_n(static_cast<char*>(t.data()), t.nbytes(), 0);
    return t;
  }
  static std::vector<float> vec(const Tensor& t) { return {t.data_as<float>(), t.data_as<float>() + t.numel()}; }
  static void expect_near(const Tensor& got, const std::vector<float>& want, float tol = 1e-5f) {
    ASSERT_EQ(size_t(got.numel()), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got.data_as<float>()[i], want[i], tol * (1.0f + std::abs(want[i]))) << "at " << i;
  }
  static std::vector<float> ref_rms(const std::vector<float>& x, const std::vector<float>& w, int64_t H, float eps) {
    std::vector<float> out(x.size());
    for (size_t t = 0; t < x.size() / size_t(H); ++t) {
      double ss = 0;
      for (int64_t i = 0; i < H; ++i) ss += double(x[t * H + i]) * x[t * H + i];
      const double r = 1.0 / std::sqrt(ss / double(H) + eps);
      for (int64_t i = 0; i < H; ++i) out[t * H + i] = float(w[size_t(i)] * x[t * H + i] * r);
    }
    return out;
  }
};

TEST_F(CpuOps, LinearMatchesNaiveForOddShapesWithAndWithoutBias) {
  for (auto [T, N, K] : {std::tuple{1, 7, 5}, {5, 33, 64}, {9, 130, 77}, {4, 64, 1}}) {
    Tensor x = rand({T, K}), w = rand({N, K}), b = rand({N}), y = zeros({T, N});
    for (bool with_bias : {false, true}) {
      be->linear(x, w, with_bias ? b : Tensor(), y);
      std::vector<float> want(size_t(T * N));
      for (int t = 0; t < T; ++t)
        for (int n = 0; n < N; ++n) {
          double s = with_bias ? b.data_as<float>()[n] : 0.0;
          for (int k = 0; k < K; ++k) s += double(x.data_as<float>()[t * K + k]) * w.data_as<float>()[n * K + k];
          want[size_t(t * N + n)] = float(s);
        }
      expect_near(y, want, 1e-4f);
    }
  }
  EXPECT_THROW(be->linear(rand({2, 3}), rand({4, 5}), Tensor(), zeros({2, 4})), Error);
}

TEST_F(CpuOps, EmbeddingAndGatherRows) {
  Tensor table = rand({10, 6}), out = zeros({3, 6});
  be->embedding(ints({4, 0, 9}), table, out);
  const auto tv = vec(table);
  std::vector<float> want;
  for (int id : {4, 0, 9}) want.insert(want.end(), tv.begin() + id * 6, tv.begin() + id * 6 + 6);
  expect_near(out, want, 0);
  Tensor g = zeros({2, 6});
  be->gather_rows(table, ints({9, 4}), g);
  std::vector<float> want_g(want.begin() + 12, want.end());  // ids 9, 4: rows 2 and 0 of `want`
  want_g.insert(want_g.end(), want.begin(), want.begin() + 6);
  expect_near(g, want_g, 0);
  EXPECT_THROW(be->embedding(ints({10}), table, zeros({1, 6})), Error);
}

TEST_F(CpuOps, RmsNormAndFusedAddRmsNorm) {
  const int64_t T = 5, H = 48;
  Tensor x = rand({T, H}), w = rand({H}), out = zeros({T, H});
  be->rms_norm(x, w, 1e-5f, out);
  expect_near(out, ref_rms(vec(x), vec(w), H, 1e-5f));

  Tensor res = rand({T, H});
  std::vector<float> sum = vec(res);
  for (size_t i = 0; i < sum.size(); ++i) sum[i] += x.data_as<float>()[i];
  be->add_rms_norm(res, x, w, 1e-5f, x);  // out aliases x
  expect_near(res, sum);
  expect_near(x, ref_rms(sum, vec(w), H, 1e-5f));
}

// RoPE as a formula: each head's halves rotated by position * theta^(-2j/D).
std::vector<float> ref_rope(std::vector<float> v, const std::vector<int>& pos, int heads, int D, double theta) {
  for (size_t t = 0; t < pos.size(); ++t)
    for (int h = 0; h < heads; ++h)
      for (int j = 0; j < D / 2; ++j) {
        const double f = pos[t] / std::pow(theta, 2.0 * j / D);
        float* p = v.data() + (int(t) * heads + h) * D;
        const double a = p[j], b = p[j + D / 2];
        p[j] = float(a * std::cos(f) - b * std::sin(f));
        p[j + D / 2] = float(b * std::cos(f) + a * std::sin(f));
      }
  return v;
}

// The fused epilogue equals slicing the fused projection, RMS-normalising each head (Qwen3's q/k norm) and
// rotating it (RoPE), computed here by formula.
TEST_F(CpuOps, SplitQkvRopeEqualsSliceNormAndRope) {
  const int D = 16, T = 4, hq = 4, hk = 2, W = (hq + 2 * hk) * D;
  RopeConfig cfg;
  cfg.theta = 10000.0f, cfg.head_dim = D;
  const std::vector<int> positions = {0, 7, 300, 65000};
  for (bool qk_norm : {false, true}) {
    SCOPED_TRACE(qk_norm ? "with q/k norm" : "plain");
    Tensor qkv = rand({T, W}), qn = rand({D}), kn = rand({D});
    const auto all = vec(qkv);
    auto slice = [&](int from, int width) {
      std::vector<float> t;
      for (int r = 0; r < T; ++r) t.insert(t.end(), all.begin() + r * W + from, all.begin() + r * W + from + width);
      return t;
    };
    std::vector<float> rq = slice(0, hq * D), rk = slice(hq * D, hk * D), rv = slice((hq + hk) * D, hk * D);
    if (qk_norm) rq = ref_rms(rq, vec(qn), D, 1e-6f), rk = ref_rms(rk, vec(kn), D, 1e-6f);
    Tensor q = zeros({T, hq * D}), k = zeros({T, hk * D}), v = zeros({T, hk * D});
    be->split_qkv_rope(qkv, ints(positions), cfg, qk_norm ? qn : Tensor(), qk_norm ? kn : Tensor(), 1e-6f, q, k, v);
    be->stream().synchronize();
    // fp32 angles: at position 65000 an angle is off by up to ~65000 * 2^-24 rad
    expect_near(q, ref_rope(rq, positions, hq, D, cfg.theta), 5e-3f);
    expect_near(k, ref_rope(rk, positions, hk, D, cfg.theta), 5e-3f);
    EXPECT_EQ(vec(v), rv);
  }
  Tensor bad = zeros({T, W - D});
  EXPECT_THROW(be->split_qkv_rope(bad, ints({0, 1, 2, 3}), cfg, Tensor(), Tensor(), 1e-6f, zeros({T, hq * D}),
                                  zeros({T, hk * D}), zeros({T, hk * D})),
               Error);
}

TEST_F(CpuOps, Llama3RopeScalingKeepsHighAndSlowsLowFrequencies) {
  RopeConfig base;
  base.theta = 500000.0f, base.head_dim = 64;
  RopeConfig scaled = base;
  scaled.llama3_factor = 32.0f;
  const auto a = rope_inv_freq(base), b = rope_inv_freq(scaled);
  ASSERT_EQ(a.size(), 32u);
  EXPECT_FLOAT_EQ(b[0], a[0]);            // wavelength 2*pi: untouched
  EXPECT_FLOAT_EQ(b[31], a[31] / 32.0f);  // longest wavelength: divided by factor
  for (size_t i = 0; i < a.size(); ++i) EXPECT_LE(b[i], a[i]);
}

TEST_F(CpuOps, GatedActivations) {
  const int64_t T = 4, I = 9;
  Tensor gu = rand({T, 2 * I}), out = zeros({T, I});
  for (GatedActivation act : {GatedActivation::Silu, GatedActivation::GeluTanh}) {
    be->gated_activation(act, gu, out);
    std::vector<float> want;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < I; ++i) {  // in double, from the definitions
        const double g = gu.data_as<float>()[t * 2 * I + i], u = gu.data_as<float>()[t * 2 * I + I + i];
        const double a = act == GatedActivation::Silu
                             ? g / (1 + std::exp(-g))
                             : 0.5 * g * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (g + 0.044715 * g * g * g)));
        want.push_back(float(a * u));
      }
    expect_near(out, want);
  }
}

TEST_F(CpuOps, UploadConvertsAndCopyMovesBytes) {
  const std::vector<uint16_t> bf = {f32_to_bf16(1.5f), f32_to_bf16(-2.0f)};
  Tensor t = be->upload(bf.data(), DType::BF16, {2}, DType::F32);
  expect_near(t, {1.5f, -2.0f}, 0);
  Tensor u = zeros({2});
  be->copy(u, t);
  expect_near(u, {1.5f, -2.0f}, 0);
  be->fill_zero(u);
  expect_near(u, {0, 0}, 0);
  EXPECT_THROW(be->copy(zeros({3}), t), Error);
}

// src [2, 2] lands in the first 2 of dst's 4 columns; the other columns keep what they held.
TEST_F(CpuOps, CopyLeadingColumnsLeavesTheOtherColumns) {
  Tensor dst = rand({2, 4});
  const std::vector<float> before = vec(dst);
  Tensor src = rand({2, 2});
  be->copy_leading_columns(dst, src);
  const std::vector<float> s = vec(src);
  expect_near(dst, {s[0], s[1], before[2], before[3], s[2], s[3], before[6], before[7]}, 0);
  EXPECT_THROW(be->copy_leading_columns(dst, zeros({2, 5})), Error);  // wider than dst
  EXPECT_THROW(be->copy_leading_columns(dst, zeros({3, 2})), Error);  // other rows
  EXPECT_THROW(be->copy_leading_columns(dst, zeros({2, 2}, DType::I32)), Error);
}

// A captured graph bakes in addresses, not values: change the inputs, replay, and it computes
// on the new contents exactly as an eager run does.
TEST_F(CpuOps, CapturedGraphReplaysOnNewInputs) {
  const int64_t T = 3, H = 16, N = 24;
  Tensor ids = ints({1, 2, 3}), table = rand({8, H}), w = rand({N, H}), nw = rand({H});
  Tensor x = zeros({T, H}), h = zeros({T, H}), y = zeros({T, N});
  auto ops = [&] {
    be->embedding(ids, table, x);
    be->rms_norm(x, nw, 1e-5f, h);
    be->scale(h, 0.5f);
    be->linear(h, w, Tensor(), y);
  };
  be->stream().begin_capture();
  ops();
  auto graph = be->stream().end_capture();
  EXPECT_EQ(graph->num_nodes(), 4u);
  EXPECT_EQ(vec(y), std::vector<float>(size_t(T * N), 0.0f));  // recorded, not run

  std::copy_n(std::vector<int>{7, 0, 5}.data(), 3, ids.data_as<int>());
  graph->replay();
  const auto replayed = vec(y);
  be->fill_zero(y);
  ops();
  EXPECT_EQ(replayed, vec(y));
  EXPECT_NE(replayed, std::vector<float>(size_t(T * N), 0.0f));
}

}  // namespace
}  // namespace gs
