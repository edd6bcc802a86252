// FP8 weights on the GPU against the CPU reference: the load-time quantization kernel equals the
// host one bit for bit; cuBLASLt has an FP8 GEMM for every token count above the GEMV, and its
// tuned GEMMs serve padded batches bit for bit; linear() on e4m3 weights (the FP8 GEMV up to 8
// tokens, cuBLASLt FP8 or the bf16 dequantization above) matches x . dequant(w)^T; the FP8 fixtures
// against HF f32; and --quantization fp8 against bf16 of the same fixtures, beside bf16 against f32
// (the yardstick).
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <utility>

#include "attention/cuda/cuda_attention.h"
#include "core/allocator.h"
#include "core/cuda/cuda_stream.h"
#include "cuda_test_util.h"
#include "device_model.h"
#include "model/checkpoint_writer.h"
#include "model/family_fixtures.h"
#include "model/llama_weights.h"
#include "model/tp_layout.h"
#include "model/weight_source.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/fp8_linear.h"
#include "ops/cuda/fp8_lt_gemm.h"
#include "ops/cuda/skinny_gemm.h"
#include "ops/fp8_weights.h"
#include "ops/kernel_options.h"
#include "runner/model_runner.h"
#include "runner/serving_sim.h"

namespace gs {
namespace {

namespace fs = std::filesystem;

// w [N, K] on the GPU as e4m3 with scales (per row, or per 128 x 128 block), and its exact
// dequantization on the host.
struct Fp8Weight {
  Tensor w;
  std::vector<float> deq;
};

// `also`: another backend that quantizes the same weight (the same bytes), sizing its own scratch.
Fp8Weight quantized(Backend& be, const std::vector<float>& w, int64_t N, int64_t K, bool block,
                    Backend* also = nullptr) {
  const Tensor src = be.upload(w.data(), DType::F32, {N, K}, DType::F32);
  const int64_t G = block ? (K + 127) / 128 : 1;
  Tensor q = Tensor::empty({N, K}, DType::F8E4M3, be.allocator())
                 .with_scales(Tensor::empty({N, G}, DType::F32, be.allocator()));
  be.quantize_fp8(src, block ? 128 : 1, block, q);
  if (also) also->quantize_fp8(src, block ? 128 : 1, block, q);
  Fp8Weight out{q, std::vector<float>(w.size())};
  fp8_quantize_host(w.data(), N, K, block ? 128 : 1, block, nullptr, nullptr, out.deq.data());
  return out;
}

// x [M, K] . deq [N, K]^T (+ bias [N]) summed in double: the dequantized weight's exact product.
std::vector<float> exact_product(const std::vector<float>& x, const std::vector<float>& deq, int64_t M, int64_t N,
                                 int64_t K, const std::vector<float>& bias = {}) {
  std::vector<float> y(size_t(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = bias.empty() ? 0.0 : double(bias[size_t(n)]);
      for (int64_t k = 0; k < K; ++k) acc += double(x[size_t(m * K + k)]) * deq[size_t(n * K + k)];
      y[size_t(m * N + n)] = float(acc);
    }
  return y;
}

// x [M, K] (bf16) . w^T on two backends that quantized the same weight, each's output read back.
std::pair<std::vector<float>, std::vector<float>> linear_on_both(Backend& a, Backend& b, const std::vector<float>& x,
                                                                 const Tensor& w, int64_t M, int64_t N, int64_t K) {
  const Tensor xd = test::on(a, x, {M, K}, DType::BF16);
  const Tensor ya = Tensor::empty({M, N}, DType::BF16, a.allocator());
  const Tensor yb = Tensor::empty({M, N}, DType::BF16, b.allocator());
  a.linear(xd, w, Tensor(), ya);
  a.stream().synchronize();
  b.linear(xd, w, Tensor(), yb);
  b.stream().synchronize();
  return {test::read(a, ya), test::read(b, yb)};
}

TEST(Fp8Kernels, QuantizationEqualsTheHostReferenceBitForBit) {
  GS_REQUIRE_GPU();
  auto be = make_cuda_backend(0, DType::BF16);
  ASSERT_TRUE(be->fp8_weights());
  const int64_t N = 200, K = 320;  // partial 128-blocks both ways
  const auto w = test::randn(size_t(N * K), 7, 0.05f);
  for (auto [group_rows, block] : {std::pair<int64_t, bool>{1, false}, {128, true}, {N, false}}) {
    const int64_t G = block ? 3 : 1;
    const Tensor src = be->upload(w.data(), DType::F32, {N, K}, DType::F32);
    Tensor q = Tensor::empty({N, K}, DType::F8E4M3, be->allocator())
                   .with_scales(Tensor::empty({N, G}, DType::F32, be->allocator()));
    be->quantize_fp8(src, group_rows, block, q);
    std::vector<uint8_t> got(size_t(N * K)), want(got.size());
    std::vector<float> want_s(size_t(N * G));
    be->copy(Tensor::wrap(got.data(), {N, K}, DType::F8E4M3, Device::cpu()), q);
    const auto got_s = test::read(*be, q.scales());
    fp8_quantize_host(w.data(), N, K, group_rows, block, want.data(), want_s.data(), nullptr);
    EXPECT_EQ(got, want) << "groups of " << group_rows << " rows";
    EXPECT_EQ(got_s, want_s) << "groups of " << group_rows << " rows";
  }
}

// The GPU's compute capability (89 for 8.9); GS_REQUIRE_FP8_TENSOR_CORES skips a test below 8.9.
int compute_capability() {
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  return major * 10 + minor;
}
#define GS_REQUIRE_FP8_TENSOR_CORES() \
  GS_REQUIRE_GPU();                   \
  if (compute_capability() < 89) GTEST_SKIP() << "FP8 tensor cores need compute capability 8.9 or later"

// Above the skinny kernel the per-channel FP8 path is cuBLASLt's e4m3 GEMM (unit scales, the
// scales after it), and above 8 tokens the 128x128 block-scaled one its block-scaled GEMM (at
// token counts that are multiples of 4; the GEMV takes the rest): the library must have both for
// the model shapes, or every batch and prefill would dequantize the weight to bf16 on each call.
TEST(Fp8Kernels, CublasLtHasAnFp8GemmAboveTheGemv) {
  GS_REQUIRE_FP8_TENSOR_CORES();
  auto be = make_cuda_backend(0, DType::BF16);
  Fp8LtGemm lt(be->allocator(), true, true);
  // The test's weight, then llama3.1-8b's qkv, gate|up and down projections.
  for (auto [N, K] : {std::pair<int, int>{384, 512}, {6144, 4096}, {28672, 4096}, {4096, 14336}})
    for (int M : {4, 9, 64, 128, 300, 4096}) {
      EXPECT_TRUE(lt.supported(M, N, K)) << "M " << M << " N " << N << " K " << K;
      if (M % 4 == 0 && M > 8) {
        EXPECT_TRUE(lt.supported(M, N, K, true)) << "blocks, M " << M << " N " << N << " K " << K;
      }
    }
}

// The start-up tuner on cuBLASLt's FP8 GEMMs (Fp8LtGemm::tune, docs/CUDA_GRAPHS.md §9), whole-row
// and 128x128 block-scaled, on llama3.1-8b's qkv and o_proj: every recorded shape is timed at each
// asked token count; a batch padded to a tuned size (60 to 64, 28 to 32) runs the same algorithm, so
// its rows equal the padded GEMM's bit for bit whatever order the winner sums in; a second start
// reads the winners from the cache, times nothing and gives the same bits.
TEST(Fp8Kernels, TunedGemmsServePaddedBatchesBitForBitAndASecondStartReadsTheCache) {
  GS_REQUIRE_FP8_TENSOR_CORES();
  auto be = make_cuda_backend(0, DType::BF16);
  const int K = 4096, Ns[] = {6144, 4096};
  const std::pair<int, int> padded[] = {{28, 32}, {60, 64}};  // (batch, the size its graph runs)
  // e4m3 bytes of magnitude 2^-2 .. 2^4 and either sign (no NaN pattern).
  std::mt19937 rng(7);
  auto bytes = [&](int64_t n) {
    std::vector<uint8_t> v(static_cast<size_t>(n));
    for (auto& b : v) b = uint8_t(0x28 + rng() % 0x30) | uint8_t(rng() & 0x80);
    return be->upload(v.data(), DType::U8, {n}, DType::U8);
  };
  auto ones = [&](int64_t n) {
    return be->upload(std::vector<float>(size_t(n), 1.0f).data(), DType::F32, {n}, DType::F32);
  };
  const int max_m = 64;
  const Tensor x = bytes(int64_t(max_m) * K), x_groups = ones(int64_t(K / 128) * max_m);
  struct Gemm {
    int n;
    bool block;
    std::vector<Tensor> ws;
    Tensor grid, y;
  };
  std::vector<Gemm> gemms;
  for (const int n : Ns)
    for (const bool block : {false, true})  // two weights a shape, as the layers the tuner cycles
      gemms.push_back({n,
                       block,
                       {bytes(int64_t(n) * K), bytes(int64_t(n) * K)},
                       ones((n + 127) / 128 * (K / 128)),
                       Tensor::empty({max_m, n}, DType::BF16, be->allocator())});
  const auto* xq = x.data_as<uint8_t>();
  const cudaStream_t s = dynamic_cast<CudaStream&>(be->stream()).handle();
  // Every GEMM at every batch and padded size: (batch's output, its rows of the padded output).
  using Outputs = std::vector<std::pair<std::vector<float>, std::vector<float>>>;
  auto outputs = [&](Fp8LtGemm& lt) {
    auto run = [&](const Gemm& g, const Tensor& w, int m) {
      lt.matmul(xq, w.data_as<uint8_t>(), g.y.data_as<uint16_t>(), m, g.n, K, s,
                g.block ? g.grid.data_as<float>() : nullptr, g.block ? x_groups.data_as<float>() : nullptr);
      return test::read(*be, g.y.prefix({m, g.n}));
    };
    Outputs out;
    for (const Gemm& g : gemms)
      for (const Tensor& w : g.ws)
        for (const auto& [m, size] : padded) {
          std::vector<float> full = run(g, w, size);
          full.resize(size_t(m) * size_t(g.n));
          out.emplace_back(run(g, w, m), std::move(full));
        }
    return out;
  };
  const fs::path dir = fs::temp_directory_path() / fmt::format("gs_fp8_tuning_{}", ::getpid());
  fs::remove_all(dir);
  GemmTuningOptions opts{.sizes = {32, 64}, .use_cache = true, .cache_dir = dir.string(), .padded_from = {}};
  for (const auto& [m, size] : padded) opts.padded_from[size] = {m};
  const auto here = [](int, int, int, bool) { return true; };
  Fp8LtGemm cold(be->allocator(), true, true);
  const Outputs heuristic = outputs(cold);
  const GemmTuningReport r = cold.tune(opts, here, s);
  EXPECT_EQ(r.tuned, 8) << "2 shapes x 2 scalings x 2 sizes";
  EXPECT_EQ(r.from_cache, 0);
  std::printf("[fp8-tuning] %d pairs timed in %.3f s, %d not the first choice\n", r.tuned, r.seconds, r.changed);
  const Outputs tuned = outputs(cold);
  ASSERT_EQ(tuned.size(), heuristic.size());
  for (size_t i = 0; i < tuned.size(); ++i) {
    EXPECT_EQ(tuned[i].first, tuned[i].second) << "GEMM " << i << ": a batch differs from its padded size's rows";
    // Another algorithm sums in another order: the bf16 outputs differ by their rounding at most.
    EXPECT_LT(test::rel_l2(tuned[i].second, heuristic[i].second), 4e-3) << "GEMM " << i;
  }

  Fp8LtGemm warm(be->allocator(), true, true);
  outputs(warm);  // records the shapes, as the warm-up does
  const GemmTuningReport again = warm.tune(opts, here, s);
  EXPECT_EQ(again.tuned, 0);
  EXPECT_EQ(again.from_cache, 8);
  EXPECT_EQ(outputs(warm), tuned);
  fs::remove_all(dir);
}

TEST(Fp8Kernels, LinearMatchesTheDequantizedWeightsAtEveryTokenCount) {
  GS_REQUIRE_GPU();
  auto be = make_cuda_backend(0, DType::BF16);
  std::printf("[fp8-kernels] %s\n", be->fp8_kernels().c_str());
  const int64_t N = 384, K = 512;
  const auto w = test::randn(size_t(N * K), 11, 0.05f);
  const auto bias = test::randn(size_t(N), 12, 0.1f);
  for (bool block : {false, true}) {
    const Fp8Weight fw = quantized(*be, w, N, K, block);
    for (int64_t M : {1, 2, 5, 8, 9, 16, 17, 32, 64, 128, 300, 4100}) {  // 4100: a prefill, in two chunks
      const auto x = test::randn(size_t(M * K), 13 + uint32_t(M), 1.0f);
      const Tensor xd = test::on(*be, x, {M, K}, DType::BF16), bd = test::on(*be, bias, {N}, DType::BF16);
      const Tensor y = Tensor::empty({M, N}, DType::BF16, be->allocator());
      be->linear(xd, fw.w, bd, y);
      const double e = test::rel_l2(test::read(*be, y), exact_product(x, fw.deq, M, N, K, bias));
      // Exact weights and bf16 output: bf16 rounding (2^-9 relative). Above the skinny kernel the
      // FP8 GEMM's activations are e4m3 per token (per 128
      // columns on blocks): 3 mantissa bits, a relative rounding error of RMS about
      // 2^-4 / sqrt(3) / 1.3 ~ 0.03 that carries into each output of this random x (plus two bf16
      // roundings), so 6e-2 is twice it.
      const Fp8KernelOptions o;
      const double bound = M <= (block ? cuda::kFp8BlockSkinnyMaxM : o.skinny_max_tokens) ? 1e-2 : 6e-2;
      EXPECT_LT(e, bound) << (block ? "block" : "channel") << " M " << M;
      std::printf("[fp8-kernels] %-7s M %3lld rel-L2 %.5f\n", block ? "block" : "channel", (long long)M, e);
    }
  }
}

// cuBLASLt's block-scaled GEMM with K split over the SMs a weight of few 128-row tiles leaves idle
// (Fp8KernelOptions::lt_block_split_k; 1024 x 2048 is 8 tiles, K in 4 shares) equals the
// dequantized weight's product within the e4m3 activations' rounding (as above), and the unsplit
// GEMM on the same operands within the output's bf16 rounding (f32 sums in another order).
TEST(Fp8Kernels, BlockScaledSplitKMatchesTheUnsplitGemm) {
  GS_REQUIRE_GPU();
  KernelOptions unsplit;
  unsplit.fp8.lt_block_split_k = false;
  auto be = make_cuda_backend(0, DType::BF16), other = make_cuda_backend(0, DType::BF16, unsplit);
  const int64_t N = 1024, K = 2048;
  const Fp8Weight fw = quantized(*be, test::randn(size_t(N * K), 71, 0.05f), N, K, true, other.get());
  for (int64_t M : {32, 64}) {
    const auto x = test::randn(size_t(M * K), 72 + uint32_t(M), 1.0f);
    const auto [got, unsplit_got] = linear_on_both(*be, *other, x, fw.w, M, N, K);
    EXPECT_LT(test::rel_l2(got, exact_product(x, fw.deq, M, N, K)), 6e-2) << "M " << M;
    EXPECT_LT(test::rel_l2(got, unsplit_got), 5e-3) << "M " << M;
  }
}

// cuBLASLt's FP8 GEMM with the tensor cores' own accumulation (Fp8KernelOptions::lt_fast_accum, the
// default) on llama3.1-8b's down projection (K 14336, the longest sum a dense model has): within
// the e4m3 activations' rounding of the dequantized weight's product (as above), within 1e-2 of
// the GEMM that promotes its sums to f32 (the accumulator's own rounding over 14336 products, well
// under the activations' 3 mantissa bits), and not the same bits (the option reaches the library).
TEST(Fp8Kernels, FastAccumulationStaysWithinTheActivationsRounding) {
  GS_REQUIRE_GPU();
  KernelOptions promoted;
  promoted.fp8.lt_fast_accum = false;
  auto be = make_cuda_backend(0, DType::BF16), other = make_cuda_backend(0, DType::BF16, promoted);
  const int64_t N = 512, K = 14336, M = 64;
  const Fp8Weight fw = quantized(*be, test::randn(size_t(N * K), 81, 0.05f), N, K, false, other.get());
  const auto x = test::randn(size_t(M * K), 82, 1.0f);
  const auto [fast, slow] = linear_on_both(*be, *other, x, fw.w, M, N, K);
  const auto want = exact_product(x, fw.deq, M, N, K);
  const double e_fast = test::rel_l2(fast, want), e_slow = test::rel_l2(slow, want), e_pair = test::rel_l2(fast, slow);
  std::printf("[fp8-kernels] fast accumulation, K %lld: rel-L2 %.5f (promoted %.5f), between them %.6f\n", (long long)K,
              e_fast, e_slow, e_pair);
  EXPECT_LT(e_fast, 6e-2);
  EXPECT_LT(e_pair, 1e-2);
  EXPECT_NE(fast, slow);
}

// A fused 128x128 block-scaled weight whose second part starts off a block row (gate | up of 320
// rows each, quantized part by part in the checkpoint's blocks, as the loader does): no 128-row
// block grid describes it, so the skinny kernel must read each row's own scales and, above it,
// cuBLASLt's block-scaled GEMM must not take it; its output still equals the dequantized weights'.
TEST(Fp8Kernels, BlockScaledPartsOffBlockRowsStayExact) {
  GS_REQUIRE_GPU();
  auto be = make_cuda_backend(0, DType::BF16);
  const int64_t P = 320, N = 2 * P, K = 512;
  const auto w = test::randn(size_t(N * K), 61, 0.05f);
  Tensor q = Tensor::empty({N, K}, DType::F8E4M3, be->allocator())
                 .with_scales(Tensor::empty({N, K / 128}, DType::F32, be->allocator()));
  std::vector<float> deq(w.size());
  for (int64_t part = 0; part < 2; ++part) {
    const float* src = w.data() + part * P * K;
    be->quantize_fp8(be->upload(src, DType::F32, {P, K}, DType::F32), 128, true, q.rows(part * P, P));
    fp8_quantize_host(src, P, K, 128, true, nullptr, nullptr, deq.data() + part * P * K);
  }
  for (int64_t M : {1, 5, 16, 64, 110}) {
    const auto x = test::randn(size_t(M * K), 62 + uint32_t(M), 1.0f);
    const Tensor y = Tensor::empty({M, N}, DType::BF16, be->allocator());
    be->linear(test::on(*be, x, {M, K}, DType::BF16), q, Tensor(), y);
    // The dequantized weight, bf16 x.
    EXPECT_LT(test::rel_l2(test::read(*be, y), exact_product(x, deq, M, N, K)), 1e-2) << "M " << M;
  }
}

// A bf16 CUDA backend (`base`'s options), one with another kernel variant besides, and the CPU
// reference.
struct Backends {
  std::unique_ptr<Backend> gpu, other, cpu;
};
Backends backends(const std::function<void(KernelOptions&)>& variant, const KernelOptions& base = {}) {
  KernelOptions o = base;
  variant(o);
  return {make_cuda_backend(0, DType::BF16, base), make_cuda_backend(0, DType::BF16, o), make_cpu_backend()};
}

// Qwen3's q / k norm in the skinny kernel at the tests' small K too (by default from K 4096).
KernelOptions head_norm_at_any_k() {
  KernelOptions o;
  o.fp8.head_norm_min_k = 0;
  return o;
}

// One layer's FP8 projections at hidden H and intermediate I: qkv [W, H] (heads of D), gate|up
// [2 I, H], and o_proj / down [H, I], from seeds seed, + 1, + 2 (`block`, `also`: as quantized).
struct Fp8Layer {
  Fp8Weight qkv, gate_up, out;
};
Fp8Layer fp8_layer(Backend& be, int64_t H, int64_t I, int64_t W, uint32_t seed, bool block = false,
                   Backend* also = nullptr) {
  return {quantized(be, test::randn(size_t(W * H), seed, 0.05f), W, H, block, also),
          quantized(be, test::randn(size_t(2 * I * H), seed + 1, 0.05f), 2 * I, H, block, also),
          quantized(be, test::randn(size_t(H * I), seed + 2, 0.05f), H, I, block, also)};
}

// Llama 3's RoPE base at head dim D, unscaled.
RopeConfig llama_rope(int D) {
  RopeConfig cfg;
  cfg.theta = 500000.0f;
  cfg.head_dim = D;
  return cfg;
}

// The decode epilogues fused into the skinny FP8 kernel (norm before the QKV projection + RoPE
// split, with and without Qwen3's q / k norm, the gated activation, the deferred norm's residual
// add) against the CPU backend on the dequantized weights, and the residual add bit for bit against
// linear + add_rms_norm of the unfused path (LinearKernelOptions::decode_fusion off), at one token,
// a few and full tiles, on whole-row and on 128x128 block scales.
class Fp8FusedEpilogues : public testing::TestWithParam<bool> {};

TEST_P(Fp8FusedEpilogues, MatchTheReferenceAndTheUnfusedPath) {
  GS_REQUIRE_GPU();
  const bool block = GetParam();
  auto [gpu, unfused, cpu] = backends([](KernelOptions& o) { o.linear.decode_fusion = false; }, head_norm_at_any_k());
  const int64_t H = 512, I = 384, hq = 8, hkv = 2, D = 64, W = (hq + 2 * hkv) * D;
  const float eps = 1e-5f;
  const RopeConfig cfg = llama_rope(int(D));
  const auto [wqkv, wgu, wo] = fp8_layer(*gpu, H, I, W, 31, block);
  const auto host = [&](const Fp8Weight& w) { return test::on(*cpu, w.deq, w.w.shape(), DType::F32); };
  const auto both = [&](const std::vector<float>& v, const Shape& sh, DType gpu_dt) {
    return std::pair{test::on(*cpu, v, sh, DType::F32), test::on(*gpu, v, sh, gpu_dt)};
  };
  const auto empty = [&](const Shape& sh) {
    return std::pair{Tensor::empty(sh, DType::F32, cpu->allocator()), Tensor::empty(sh, DType::BF16, gpu->allocator())};
  };
  // 32: small weights on whole-row scales take the skinny kernel up to 32 tokens
  for (int64_t M : {1, 3, 16, 32}) {
    if (block && M > cuda::kFp8BlockSkinnyMaxM) continue;
    SCOPED_TRACE(testing::Message() << (block ? "block" : "channel") << " M " << M);
    const auto close = [&](const Tensor& c, const Tensor& g, const char* what) {
      const double e = test::rel_l2(test::read(*gpu, g), test::read(*cpu, c));
      EXPECT_LT(e, 1e-2) << what;
      return e;
    };
    const auto r0 = test::randn(size_t(M * H), 34 + uint32_t(M));
    auto [cr, gr] = both(r0, {M, H}, DType::F32);
    auto [cg, gg] = both(test::randn(size_t(H), 35), {H}, DType::BF16);
    auto [cb, gb] = both(test::randn(size_t(W), 36, 0.1f), {W}, DType::BF16);
    std::vector<int32_t> pos;
    for (int64_t m = 0; m < M; ++m) pos.push_back(int32_t(700 + 131 * m));
    auto [cn, gn] = empty({M, H});
    auto [cs, gs] = empty({M, W});
    auto [cq, gq] = empty({M, hq * D});
    auto [ck, gk] = empty({M, hkv * D});
    auto [cv, gv] = empty({M, hkv * D});
    cpu->linear({.x = cn,
                 .norm = RmsNormInput{cr, cg, eps},
                 .w = host(wqkv),
                 .bias = cb,
                 .y = cs,
                 .then = SplitQkvRope{test::on_i32(*cpu, pos, {M}), &cfg, Tensor(), Tensor(), eps, cq, ck, cv}});
    gpu->linear({.x = gn,
                 .norm = RmsNormInput{gr, gg, eps},
                 .w = wqkv.w,
                 .bias = gb,
                 .y = gs,
                 .then = SplitQkvRope{test::on_i32(*gpu, pos, {M}), &cfg, Tensor(), Tensor(), eps, gq, gk, gv}});
    const double eq = close(cq, gq, "q"), ek = close(ck, gk, "k"), ev = close(cv, gv, "v");
    // With Qwen3's q / k norm (the kernel's head-norm epilogue), on x as the first call left it.
    auto [cqn, gqn] = both(test::randn(size_t(D), 39), {D}, DType::BF16);
    auto [ckn, gkn] = both(test::randn(size_t(D), 40), {D}, DType::BF16);
    cpu->linear({.x = cn,
                 .w = host(wqkv),
                 .bias = cb,
                 .y = cs,
                 .then = SplitQkvRope{test::on_i32(*cpu, pos, {M}), &cfg, cqn, ckn, eps, cq, ck, cv}});
    gpu->linear({.x = test::on(*gpu, test::read(*cpu, cn), {M, H}, DType::BF16),
                 .w = wqkv.w,
                 .bias = gb,
                 .y = gs,
                 .then = SplitQkvRope{test::on_i32(*gpu, pos, {M}), &cfg, gqn, gkn, eps, gq, gk, gv}});
    close(cq, gq, "q (q/k norm)"), close(ck, gk, "k (q/k norm)"), close(cv, gv, "v (q/k norm)");

    auto [cx, gx] = both(test::randn(size_t(M * H), 37), {M, H}, DType::BF16);
    auto [cgu, ggu] = empty({M, 2 * I});
    auto [co, go] = empty({M, I});
    cpu->linear({.x = cx, .w = host(wgu), .y = cgu, .then = Gated{GatedActivation::Silu, co}});
    gpu->linear({.x = gx, .w = wgu.w, .y = ggu, .then = Gated{GatedActivation::Silu, go}});
    const double eg = close(co, go, "gated");

    auto [cxo, gxo] = both(test::randn(size_t(M * I), 38), {M, I}, DType::BF16);
    const Tensor gr_unfused = test::on(*gpu, r0, {M, H}, DType::F32);
    auto [cy, gy] = empty({M, H});
    auto [cno, gno] = empty({M, H});
    const Tensor gy2 = Tensor::empty({M, H}, DType::BF16, gpu->allocator());
    const Tensor gno2 = Tensor::empty({M, H}, DType::BF16, gpu->allocator());
    cpu->linear({.x = cxo, .w = host(wo), .y = cy, .then = AddRmsNorm{cr, cg, eps, cno}});
    gpu->linear({.x = gxo, .w = wo.w, .y = gy, .then = AddRmsNorm{gr, gg, eps, gno}});
    gpu->stream().synchronize();
    unfused->linear({.x = gxo, .w = wo.w, .y = gy2, .then = AddRmsNorm{gr_unfused, gg, eps, gno2}});
    unfused->stream().synchronize();
    EXPECT_EQ(test::read(*gpu, gr), test::read(*gpu, gr_unfused));
    const double er = close(cr, gr, "residual");
    std::printf("[fp8-fused] %-7s M %2lld rel-L2 vs CPU: q %.4f k %.4f v %.4f gated %.4f residual %.5f\n",
                block ? "block" : "channel", (long long)M, eq, ek, ev, eg, er);
  }
}

INSTANTIATE_TEST_SUITE_P(Fp8Kernels, Fp8FusedEpilogues, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& p) { return p.param ? "Block128" : "WholeRow"; });

// The deferred norm at one token (Backend::defers_norm): the skinny FP8 kernel computes the norm of
// the f32 residual itself (no norm kernel); its QKV + RoPE (with and without Qwen3's q / k norm)
// and gate|up + SiLU outputs equal rms_norm then the same projection (LinearKernelOptions::
// decode_fusion off) and the CPU reference on the dequantized weights within bf16 rounding, on
// whole-row and on 128x128 block scales.
class Fp8DeferredNorm : public testing::TestWithParam<bool> {};

TEST_P(Fp8DeferredNorm, InTheKernelMatchesTheSeparateNorm) {
  GS_REQUIRE_GPU();
  const bool block = GetParam();
  auto [gpu, unfused, cpu] = backends([](KernelOptions& o) { o.linear.decode_fusion = false; }, head_norm_at_any_k());
  ASSERT_TRUE(gpu->defers_norm(1));
  const int64_t H = 1024, I = 384, hq = 8, hkv = 2, D = 64, W = (hq + 2 * hkv) * D, M = 1;
  const float eps = 1e-5f;
  const RopeConfig cfg = llama_rope(int(D));
  const Fp8Weight wqkv = quantized(*gpu, test::randn(size_t(W * H), 41, 0.05f), W, H, block);
  const Fp8Weight wgu = quantized(*gpu, test::randn(size_t(2 * I * H), 42, 0.05f), 2 * I, H, block);
  const auto r0 = test::randn(size_t(M * H), 43, 3.0f), g0 = test::randn(size_t(H), 44);
  const Tensor res = test::on(*gpu, r0, {M, H}, DType::F32), nw = test::on(*gpu, g0, {H}, DType::BF16);
  const Tensor cres = test::on(*cpu, r0, {M, H}, DType::F32), cnw = test::on(*cpu, g0, {H}, DType::F32);
  const Tensor pos = test::on_i32(*gpu, std::vector<int32_t>{1234}, {M}),
               cpos = test::on_i32(*cpu, std::vector<int32_t>{1234}, {M});
  const auto gpu_empty = [&](int64_t n) { return Tensor::empty({M, n}, DType::BF16, gpu->allocator()); };
  const auto cpu_empty = [&](int64_t n) { return Tensor::empty({M, n}, DType::F32, cpu->allocator()); };
  const auto host = [&](const Fp8Weight& w) { return test::on(*cpu, w.deq, w.w.shape(), DType::F32); };
  // Qwen3's q / k norm weights: that RoPE split is not fused, the norm before QKV still is.
  const auto qn0 = test::randn(size_t(D), 45), kn0 = test::randn(size_t(D), 46);
  const Tensor qn = test::on(*gpu, qn0, {D}, DType::BF16), kn = test::on(*gpu, kn0, {D}, DType::BF16);
  const Tensor cqn = test::on(*cpu, qn0, {D}, DType::F32), ckn = test::on(*cpu, kn0, {D}, DType::F32);
  // q | k | v, the activation, and q | k | v with q / k norm, each from the backend's own fused or
  // unfused path.
  const auto run = [&](Backend& be, const Tensor& r, const Tensor& g, const Tensor& p, const Tensor& wq,
                       const Tensor& wg, const Tensor& q_norm, const Tensor& k_norm,
                       const std::function<Tensor(int64_t)>& empty) {
    const Tensor x = empty(H), q = empty(hq * D), k = empty(hkv * D), v = empty(hkv * D), act = empty(I);
    const Tensor qh = empty(hq * D), kh = empty(hkv * D), vh = empty(hkv * D);
    be.linear({.x = x,
               .norm = RmsNormInput{r, g, eps},
               .w = wq,
               .y = empty(W),
               .then = SplitQkvRope{p, &cfg, Tensor(), Tensor(), eps, q, k, v}});
    be.linear({.x = x,
               .norm = RmsNormInput{r, g, eps},
               .w = wg,
               .y = empty(2 * I),
               .then = Gated{GatedActivation::Silu, act}});
    be.linear({.x = x,
               .norm = RmsNormInput{r, g, eps},
               .w = wq,
               .y = empty(W),
               .then = SplitQkvRope{p, &cfg, q_norm, k_norm, eps, qh, kh, vh}});
    return std::vector<Tensor>{q, k, v, act, qh, kh, vh};
  };
  const auto fused = run(*gpu, res, nw, pos, wqkv.w, wgu.w, qn, kn, gpu_empty);
  const auto sep = run(*unfused, res, nw, pos, wqkv.w, wgu.w, qn, kn, gpu_empty);
  const auto ref = run(*cpu, cres, cnw, cpos, host(wqkv), host(wgu), cqn, ckn, cpu_empty);
  gpu->stream().synchronize();
  unfused->stream().synchronize();
  const char* names[] = {"q", "k", "v", "act", "q (q/k norm)", "k (q/k norm)", "v (q/k norm)"};
  for (size_t i = 0; i < fused.size(); ++i) {
    const auto f = test::read(*gpu, fused[i]);
    const double e_sep = test::rel_l2(f, test::read(*unfused, sep[i])),
                 e_ref = test::rel_l2(f, test::read(*cpu, ref[i]));
    std::printf("[fp8-deferred-norm] %-7s %-12s rel-L2 vs separate norm %.5f, vs CPU %.4f\n",
                block ? "block" : "channel", names[i], e_sep, e_ref);
    // x rounded to bf16 before or after the 1 / rms (2^-9 relative each), and the outputs' rounding
    EXPECT_LT(e_sep, 5e-3) << names[i];
    EXPECT_LT(e_ref, 1e-2) << names[i];
  }
}

INSTANTIATE_TEST_SUITE_P(Fp8Kernels, Fp8DeferredNorm, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& p) { return p.param ? "Block128" : "WholeRow"; });

// Below Fp8KernelOptions::head_norm_min_k, Qwen3's QKV at one token takes the FP8 GEMV with the head
// norm (Fp8KernelOptions::head_norm_gemv): at head dim 128 (reading x: clusters of two 32-warp
// blocks; norming the residual: 8-warp blocks), on whole-row and on 128x128 block scales, its q, k,
// v equal the skinny kernel's head-norm epilogue (forced at every K) on the same e4m3 weights within
// bf16 rounding, and the CPU reference on the dequantized weights.
TEST(Fp8Kernels, HeadNormGemvMatchesTheSkinnyKernel) {
  GS_REQUIRE_GPU();
  auto gpu = make_cuda_backend(0, DType::BF16), other = make_cuda_backend(0, DType::BF16, head_norm_at_any_k());
  auto cpu = make_cpu_backend();
  const int64_t H = 1024, hq = 8, hkv = 2, D = 128, W = (hq + 2 * hkv) * D;
  const float eps = 1e-6f;
  RopeConfig cfg = llama_rope(int(D));
  cfg.theta = 1000000.0f;  // Qwen3's
  const auto x0 = test::randn(size_t(H), 52), r0 = test::randn(size_t(H), 53, 3.0f), g0 = test::randn(size_t(H), 54);
  const auto qn0 = test::randn(size_t(D), 55), kn0 = test::randn(size_t(D), 56), b0 = test::randn(size_t(W), 57, 0.1f);
  const std::vector<int32_t> pos{987};
  // q | k | v of backend `be` (f32 tensors on the CPU) on x, or on rms_norm(residual) (`normed`).
  const auto run = [&](Backend& be, const Fp8Weight& wqkv, bool normed) {
    const DType dt = &be == cpu.get() ? DType::F32 : DType::BF16;
    const auto on = [&](const std::vector<float>& v, const Shape& sh, DType d) { return test::on(be, v, sh, d); };
    const Tensor x = on(x0, {1, H}, dt), q = Tensor::empty({1, hq * D}, dt, be.allocator()),
                 k = Tensor::empty({1, hkv * D}, dt, be.allocator()),
                 v = Tensor::empty({1, hkv * D}, dt, be.allocator());
    const Tensor w = &be == cpu.get() ? on(wqkv.deq, wqkv.w.shape(), DType::F32) : wqkv.w;
    const auto norm =
        normed ? std::optional(RmsNormInput{on(r0, {1, H}, DType::F32), on(g0, {H}, dt), eps}) : std::nullopt;
    be.linear(
        {.x = x,
         .norm = norm,
         .w = w,
         .bias = on(b0, {W}, dt),
         .y = Tensor::empty({1, W}, dt, be.allocator()),
         .then = SplitQkvRope{test::on_i32(be, pos, {1}), &cfg, on(qn0, {D}, dt), on(kn0, {D}, dt), eps, q, k, v}});
    be.stream().synchronize();
    return std::vector<std::vector<float>>{test::read(be, q), test::read(be, k), test::read(be, v)};
  };
  for (bool block : {false, true}) {
    const Fp8Weight wqkv = quantized(*gpu, test::randn(size_t(W * H), 51, 0.05f), W, H, block);
    for (bool normed : {false, true}) {
      SCOPED_TRACE(testing::Message() << (block ? "block " : "channel ") << (normed ? "normed" : "x"));
      const auto got = run(*gpu, wqkv, normed), sk = run(*other, wqkv, normed), ref = run(*cpu, wqkv, normed);
      for (size_t i = 0; i < got.size(); ++i) {
        const double e_sk = test::rel_l2(got[i], sk[i]), e_ref = test::rel_l2(got[i], ref[i]);
        std::printf("[fp8-head-norm-gemv] %-7s %s %c rel-L2 vs skinny %.5f, vs CPU %.4f\n", block ? "block" : "channel",
                    normed ? "normed" : "x     ", "qkv"[i], e_sk, e_ref);
        EXPECT_LT(e_sk, 5e-3) << "qkv"[i];
        EXPECT_LT(e_ref, 1e-2) << "qkv"[i];
      }
    }
  }
}

// Above the skinny kernel (cuBLASLt's FP8 GEMM) the product's scales and bias are applied by the op
// that consumes it (Fp8KernelOptions::lt_fused_epilogues): the RoPE split (with a bias, and with
// Qwen3's q / k norm), the gated activation and the residual add + norm equal the scale pass + op
// within the one bf16 rounding of the scaled product they skip, and the CPU reference on the
// dequantized weights within the e4m3 activations' rounding; 4100 rows run as two chunks. On
// 128x128 blocks the library scales (the ops read y as it is) and a chunk's last M % 4 rows take
// the GEMV: the same outputs both ways.
TEST(Fp8Kernels, ScalesInTheConsumingOpMatchTheScalePass) {
  GS_REQUIRE_GPU();
  auto [gpu, pass, cpu] = backends([](KernelOptions& o) { o.fp8.lt_fused_epilogues = false; });
  const int64_t H = 512, I = 768, hq = 8, hkv = 2, D = 64, W = (hq + 2 * hkv) * D;
  const float eps = 1e-5f;
  const RopeConfig cfg = llama_rope(int(D));
  const auto bias = test::randn(size_t(W), 54, 0.1f), qn = test::randn(size_t(D), 55), g0 = test::randn(size_t(H), 56);
  for (const bool block : {false, true})
    for (int64_t M : {64, 301, 4100}) {
      SCOPED_TRACE(testing::Message() << (block ? "blocks" : "channels") << ", M " << M);
      const auto [wqkv, wgu, wo] = fp8_layer(*gpu, H, I, W, 51, block, pass.get());
      const auto x = test::randn(size_t(M * H), 57 + uint32_t(M)), xo = test::randn(size_t(M * I), 58 + uint32_t(M));
      const auto r0 = test::randn(size_t(M * H), 59 + uint32_t(M), 3.0f);
      std::vector<int32_t> pos;
      for (int64_t m = 0; m < M; ++m) pos.push_back(int32_t(17 + 5 * m));
      // q, k, v without and with q / k norm, the activation, the residual and the norm after it,
      // from one backend (GPU bf16, or the CPU in f32 on the dequantized weights).
      const auto run = [&](Backend& be, bool host) {
        const DType dt = host ? DType::F32 : DType::BF16;
        const auto in = [&](const std::vector<float>& v, const Shape& sh, DType d) { return test::on(be, v, sh, d); };
        const auto empty = [&](int64_t n) { return Tensor::empty({M, n}, dt, be.allocator()); };
        const auto weight = [&](const Fp8Weight& w) { return host ? in(w.deq, w.w.shape(), DType::F32) : w.w; };
        const Tensor p = test::on_i32(be, pos, {M}), b = in(bias, {W}, dt), n = in(qn, {D}, dt);
        std::vector<Tensor> out;
        for (bool qk_norm : {false, true}) {
          const Tensor q = empty(hq * D), k = empty(hkv * D), v = empty(hkv * D);
          const Tensor qkn = qk_norm ? n : Tensor();
          be.linear({.x = in(x, {M, H}, dt),
                     .w = weight(wqkv),
                     .bias = b,
                     .y = empty(W),
                     .then = SplitQkvRope{p, &cfg, qkn, qkn, eps, q, k, v}});
          out.insert(out.end(), {q, k, v});
        }
        const Tensor act = empty(I);
        be.linear(
            {.x = in(x, {M, H}, dt), .w = weight(wgu), .y = empty(2 * I), .then = Gated{GatedActivation::Silu, act}});
        const Tensor res = in(r0, {M, H}, DType::F32), hid = empty(H);
        be.linear(
            {.x = in(xo, {M, I}, dt), .w = weight(wo), .y = hid, .then = AddRmsNorm{res, in(g0, {H}, dt), eps, hid}});
        out.insert(out.end(), {act, res, hid});
        be.stream().synchronize();
        std::vector<std::vector<float>> host_out;
        for (const Tensor& t : out) host_out.push_back(test::read(be, t));
        return host_out;
      };
      // The CPU reference up to 301 rows (4100 checks the second chunk's offsets against the scale pass).
      const auto fused = run(*gpu, false), sep = run(*pass, false), ref = M <= 301 ? run(*cpu, true) : fused;
      const char* names[] = {"q", "k", "v", "q (norm)", "k (norm)", "v (norm)", "act", "residual", "norm"};
      for (size_t i = 0; i < fused.size(); ++i) {
        const double e_sep = test::rel_l2(fused[i], sep[i]), e_ref = test::rel_l2(fused[i], ref[i]);
        std::printf("[fp8-lt-epilogue] %-8s M %4lld %-9s rel-L2 vs scale pass %.5f, vs CPU %.4f\n",
                    block ? "blocks" : "channels", (long long)M, names[i], e_sep, e_ref);
        // The scale pass rounds the product to bf16 once more (2^-9 relative), and the outputs'
        // rounding; against the CPU, as LinearMatchesTheDequantizedWeights bounds the e4m3 activations.
        EXPECT_LT(e_sep, 5e-3) << names[i];
        EXPECT_LT(e_ref, 6e-2) << names[i];
      }
    }
}

// On cuBLASLt's path the gated activation and the residual add + norm store their output quantized
// per token, and the next projection reads that instead of quantizing its input
// (Fp8KernelOptions::quantize_in_producer): a layer's chain gate_up -> down (+ add + norm) -> QKV
// gives the same bits as every projection quantizing its own input. That the projection reads the
// handoff: an overwrite of act behind the backend's back (on the raw stream) leaves down's output
// as it was; an overwrite through the backend (an op enqueued in between) drops the handoff, so down
// reads the new act. (Batches of kGatedHandoffMinTokens tokens or more: below, down quantizes act.)
TEST(Fp8Kernels, QuantizedHandoffEqualsQuantizingTheInput) {
  GS_REQUIRE_GPU();
  auto [gpu, off, cpu] = backends([](KernelOptions& o) { o.fp8.quantize_in_producer = false; });
  const int64_t H = 512, I = 1536, hq = 8, hkv = 2, D = 64, W = (hq + 2 * hkv) * D;
  const float eps = 1e-5f;
  const RopeConfig cfg = llama_rope(int(D));
  const auto [wqkv, wgu, wd] = fp8_layer(*gpu, H, I, W, 61, false, off.get());
  const auto g0 = test::randn(size_t(H), 64);
  for (int64_t M : {int64_t(Fp8Linear::kGatedHandoffMinTokens), int64_t(301)}) {
    SCOPED_TRACE(testing::Message() << "M " << M);
    const auto x = test::randn(size_t(M * H), 65 + uint32_t(M)), r0 = test::randn(size_t(M * H), 66, 3.0f);
    std::vector<int32_t> pos;
    for (int64_t m = 0; m < M; ++m) pos.push_back(int32_t(3 + 2 * m));
    // between(be, act): what runs between gate_up and down.
    const auto run = [&](Backend& be, const std::function<void(Backend&, const Tensor&)>& between) {
      const auto empty = [&](int64_t n) { return Tensor::empty({M, n}, DType::BF16, be.allocator()); };
      const Tensor act = empty(I), res = test::on(be, r0, {M, H}, DType::F32), hid = empty(H);
      const Tensor q = empty(hq * D), k = empty(hkv * D), v = empty(hkv * D), p = test::on_i32(be, pos, {M});
      const Tensor g = test::on(be, g0, {H}, DType::BF16), xin = test::on(be, x, {M, H}, DType::BF16);
      const Tensor gu = empty(2 * I), y = empty(H), qkv = empty(W);
      be.stream().synchronize();
      be.linear({.x = xin, .w = wgu.w, .y = gu, .then = Gated{GatedActivation::Silu, act}});
      between(be, act);
      be.linear({.x = act, .w = wd.w, .y = y, .then = AddRmsNorm{res, g, eps, hid}});
      be.linear({.x = hid, .w = wqkv.w, .y = qkv, .then = SplitQkvRope{p, &cfg, Tensor(), Tensor(), eps, q, k, v}});
      be.stream().synchronize();
      std::vector<std::vector<float>> out;
      for (const Tensor& t : {act, res, hid, q, k, v}) out.push_back(test::read(be, t));
      return out;
    };
    const auto nothing = [](Backend&, const Tensor&) {};
    const auto handed = run(*gpu, nothing), own = run(*off, nothing);
    const char* names[] = {"act", "residual", "norm", "q", "k", "v"};
    for (size_t i = 0; i < handed.size(); ++i) EXPECT_EQ(handed[i], own[i]) << names[i];

    const Tensor zeros = test::on(*gpu, std::vector<float>(size_t(M * I)), {M, I}, DType::BF16);
    const cudaStream_t h = dynamic_cast<CudaStream&>(gpu->stream()).handle();  // taken before the chain
    const auto raw = [&](Backend&, const Tensor& act) {  // not through the backend: the handoff holds
      ASSERT_EQ(cudaMemcpyAsync(act.data(), zeros.data(), act.nbytes(), cudaMemcpyDeviceToDevice, h), cudaSuccess);
    };
    const auto through = [&](Backend& be, const Tensor& act) { be.copy(act, zeros); };
    const auto behind = run(*gpu, raw), dropped = run(*gpu, through), zero_act = run(*off, through);
    for (size_t i = 1; i < handed.size(); ++i) {
      EXPECT_EQ(behind[i], own[i]) << names[i] << ": down read the handoff, not act";
      EXPECT_EQ(dropped[i], zero_act[i]) << names[i] << ": an op in between drops the handoff";
    }
    EXPECT_NE(zero_act[2], own[2]) << "act's overwrite changes the norm";
  }
}

// Teacher-forced logits of one prefill over prompt + HF's tokens (as families_bf16_test.cpp).
struct TeacherForced {
  std::vector<std::vector<float>> rows;  // per position: the logits choosing HF's token there
};
TeacherForced teacher_forced(const ModelSource& src, const test::FamilyFixture& fx, size_t r) {
  test::DeviceModel m(make_cuda_backend(0, DType::BF16), src, 128,
                      [](Backend& b, const AttentionShape& s) { return make_cuda_attention(b, s); });
  std::vector<int32_t> seq = fx.prompts[r];
  seq.insert(seq.end(), fx.tokens[r].begin(), fx.tokens[r].end() - 1);
  const auto logits = m.prefill(seq);
  TeacherForced t;
  for (size_t s = 0; s < fx.tokens[r].size(); ++s) t.rows.push_back(logits[fx.prompts[r].size() - 1 + s]);
  return t;
}

int argmax(const std::vector<float>& v) { return int(std::max_element(v.begin(), v.end()) - v.begin()); }

class Fp8Checkpoints : public ::testing::TestWithParam<std::string> {};

TEST_P(Fp8Checkpoints, CloseToHuggingFaceF32AndGreedyThroughTheRunner) {
  GS_REQUIRE_GPU();
  const test::FamilyFixture fx = test::load_family_fixture(GetParam());
  ModelSource src;
  src.dir = test::family_dir(GetParam()).string();
  int agree = 0, total = 0;
  double worst = 0;
  for (size_t r = 0; r < fx.prompts.size(); ++r) {
    const TeacherForced t = teacher_forced(src, fx, r);
    for (size_t s = 0; s < t.rows.size(); ++s, ++total) {
      agree += argmax(t.rows[s]) == fx.tokens[r][s];
      const auto k = std::find(fx.logit_steps.begin(), fx.logit_steps.end(), int(s));
      if (k != fx.logit_steps.end())
        worst = std::max(worst, test::rel_l2(t.rows[s], fx.logits[r][size_t(k - fx.logit_steps.begin())]));
    }
  }
  RunnerConfig c;
  c.device = "cuda", c.dtype = "bfloat16", c.model = src.dir;
  c.max_num_seqs = 4, c.max_num_batched_tokens = 32, c.kv_cache_memory_bytes = size_t(64) << 20;
  c.compilation.cudagraph_mode = CUDAGraphMode::FULL_AND_PIECEWISE;
  ModelRunner runner(c);
  std::vector<test::SimRequest> reqs;
  for (size_t i = 0; i < fx.prompts.size(); ++i)
    reqs.push_back(test::greedy_request(fx.prompts[i], int(fx.tokens[i].size()), int(i)));
  const auto res = test::simulate(runner, reqs, 32);
  int prefix = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    size_t p = 0;
    while (p < fx.tokens[i].size() && res.outputs[i][p] == fx.tokens[i][p]) ++p;
    prefix += int(p);
  }
  std::printf(
      "[fp8-checkpoint] %-12s teacher-forced greedy agreement with HF f32 %d/%d, logits rel-L2 max %.4f, "
      "free-running FULL_AND_PIECEWISE tokens equal before the first difference %d/%d\n",
      GetParam().c_str(), agree, total, worst, prefix, total);
  EXPECT_GE(agree, total * 85 / 100);
  EXPECT_LT(worst, 0.1);
}

INSTANTIATE_TEST_SUITE_P(HuggingFace, Fp8Checkpoints, ::testing::ValuesIn(test::fp8_family_names()),
                         [](const auto& info) { return info.param; });

// --quantization fp8 against bf16 of the same model (96 teacher-forced tokens: 2 prompts x 48),
// beside bf16 against HF f32 (the yardstick, printed): FP8's logits stay within e4m3's rounding.
class Fp8Online : public ::testing::TestWithParam<std::string> {};

TEST_P(Fp8Online, LogitsWithinE4m3RoundingOfBf16) {
  GS_REQUIRE_GPU();
  const test::FamilyFixture fx = test::load_family_fixture(GetParam());
  ModelSource bf16, fp8;
  bf16.dir = fp8.dir = test::family_dir(GetParam()).string();
  fp8.quantization = "fp8";
  int fp8_vs_bf16 = 0, bf16_vs_f32 = 0, total = 0;
  double rel_fp8 = 0, rel_bf16 = 0;
  int n_rel = 0;
  for (size_t r = 0; r < fx.prompts.size(); ++r) {
    const TeacherForced b = teacher_forced(bf16, fx, r), f = teacher_forced(fp8, fx, r);
    for (size_t s = 0; s < b.rows.size(); ++s, ++total) {
      fp8_vs_bf16 += argmax(f.rows[s]) == argmax(b.rows[s]);
      bf16_vs_f32 += argmax(b.rows[s]) == fx.tokens[r][s];
      const auto k = std::find(fx.logit_steps.begin(), fx.logit_steps.end(), int(s));
      if (k == fx.logit_steps.end()) continue;
      rel_fp8 += test::rel_l2(f.rows[s], b.rows[s]);
      rel_bf16 += test::rel_l2(b.rows[s], fx.logits[r][size_t(k - fx.logit_steps.begin())]);
      ++n_rel;
    }
  }
  std::printf(
      "[fp8-online] %-12s FP8 vs bf16: agreement %d/%d, logits rel-L2 mean %.4f | bf16 vs HF f32: agreement %d/%d, "
      "rel-L2 mean %.4f\n",
      GetParam().c_str(), fp8_vs_bf16, total, rel_fp8 / n_rel, bf16_vs_f32, total, rel_bf16 / n_rel);
  // e4m3 keeps 3 mantissa bits: every quantized weight and activation carries a relative rounding
  // error of RMS about 2^-4 / sqrt(3) ~ 0.036, and two layers of projections (weights and per-token
  // activations both quantized) plus the logits compound it to about 0.1 of the logits' norm. These
  // random tiny fixtures have small top-2 margins, so argmax agreement depends on the fixture; the
  // logits' distance is the measure (a wrong scale or layout gives more than 0.5).
  EXPECT_LT(rel_fp8 / n_rel, 0.2);
  EXPECT_GE(fp8_vs_bf16, total * 2 / 3);
}

INSTANTIATE_TEST_SUITE_P(HuggingFace, Fp8Online, ::testing::Values("llama", "qwen3", "gemma2"),
                         [](const auto& info) { return info.param; });

// --quantization fp8 on a mixture of experts whose widths the FP8 expert kernels take (the
// qwen3_moe fixture's config at hidden 128 and expert width 128, dummy weights, every expert
// selected so that no near-tied routing flips under rounding): on the GPU the routed experts load
// as e4m3 with a scale a row, the bytes and scales of the host quantization of the same weights,
// and run through moe_experts' FP8 form; the CPU reference computes in f32 on the same quantized
// values (ops/fp8_weights.h). Prompts of 1 token (the small-batch path), 2, 5 and 40 (the sorted
// path's items of 8, 16 and 32 pairs). From 17 tokens the attention projections' FP8 GEMMs
// quantize activations per token where the reference does not, so there the bound is that of
// Fp8Online; below it, bf16 rounding's. bf16 against f32 without quantization is printed as the
// yardstick, and the quantization must have moved the reference.
TEST(Fp8Experts, QuantizedMixtureOfExpertsMatchesTheCpuReference) {
  GS_REQUIRE_GPU();
  test::TempDir dir;
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(test::family_dir("qwen3_moe") / "config.json"));
  cfg["hidden_size"] = 128, cfg["moe_intermediate_size"] = 128, cfg["intermediate_size"] = 256;
  cfg["num_experts_per_tok"] = cfg["num_local_experts"];
  std::ofstream(dir.path() / "config.json") << cfg.dump();
  ModelSource plain, fp8;
  plain.dir = fp8.dir = dir.path().string();
  plain.dummy = fp8.dummy = true;
  fp8.quantization = "fp8";
  {
    auto gpu = make_cuda_backend(0, DType::BF16);
    auto cpu = make_cpu_backend();
    const ModelConfig qc = resolve_model_config(fp8), pc = resolve_model_config(plain);
    auto gsrc = make_dummy_source(0, *gpu), csrc = make_dummy_source(0, *cpu);
    const LlamaWeights g = load_llama_weights(qc, make_tp_layout(qc, 0, 1), *gpu, *gsrc);
    const LlamaWeights c = load_llama_weights(pc, make_tp_layout(pc, 0, 1), *cpu, *csrc);
    for (auto member : {&MoeLayerWeights::experts_gate_up, &MoeLayerWeights::experts_down}) {
      const Tensor& q = g.layers[0].moe.*member;
      const Tensor& w = c.layers[0].moe.*member;
      ASSERT_EQ(q.dtype(), DType::F8E4M3);
      const int64_t N = w.dim(0), K = w.row_elems();
      std::vector<uint8_t> got(size_t(N * K)), want(got.size());
      std::vector<float> want_s(static_cast<size_t>(N));
      gpu->copy(Tensor::wrap(got.data(), {N, K}, DType::F8E4M3, Device::cpu()), q);
      fp8_quantize_host(w.data_as<const float>(), N, K, 1, false, want.data(), want_s.data(), nullptr);
      EXPECT_EQ(got, want);
      EXPECT_EQ(test::read(*gpu, q.scales()), want_s);
    }
  }
  const auto run = [](const ModelSource& src, bool gpu, const std::vector<int32_t>& prompt) {
    using MakeAttention = std::unique_ptr<AttentionBackend> (*)(Backend&, const AttentionShape&);
    const MakeAttention cuda = [](Backend& b, const AttentionShape& s) { return make_cuda_attention(b, s); };
    const MakeAttention cpu = [](Backend& b, const AttentionShape& s) { return make_cpu_attention(b, s); };
    test::DeviceModel m(gpu ? make_cuda_backend(0, DType::BF16) : make_cpu_backend(), src, 64, gpu ? cuda : cpu);
    return m.prefill(prompt);
  };
  for (int n : {1, 2, 5, 40}) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < n; ++i) prompt.push_back((i * 37 + 11) % 500 + 3);
    const auto got = run(fp8, true, prompt), want = run(fp8, false, prompt);
    const auto bf16 = run(plain, true, prompt), f32 = run(plain, false, prompt);
    double worst = 0, yard = 0, moved = 0;
    int agree = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      worst = std::max(worst, test::rel_l2(got[i], want[i]));
      yard = std::max(yard, test::rel_l2(bf16[i], f32[i]));
      moved = std::max(moved, test::rel_l2(want[i], f32[i]));
      agree += argmax(got[i]) == argmax(want[i]);
    }
    std::printf(
        "[fp8-experts] %2d tokens: GPU FP8 vs CPU FP8 reference rel-L2 max %.4f, argmax agreement %d/%d | bf16 vs "
        "f32 %.4f | the quantization moved the reference by %.4f\n",
        n, worst, agree, n, yard, moved);
    EXPECT_LT(worst, n > 16 ? 0.2 : std::max(0.02, 3 * yard)) << n << " tokens";
    EXPECT_GT(moved, 0.01) << "the weights were not quantized";
  }
}

}  // namespace
}  // namespace gs
