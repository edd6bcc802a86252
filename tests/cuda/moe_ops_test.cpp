// The fused MoE kernels (moe_route, moe_experts) against the CPU reference: the same experts
// and weights for softmax, sigmoid + bias and group-limited routing; the experts' output at one
// token (the decode path: k experts read), a few and many tokens, with and without a gated shared
// expert; the small-batch path (items straight from the routing, the reduce in the down GEMM)
// equal to the sorted path; and a captured graph replayed after the routing changed equals an
// eager run; FP8 experts (a scale a row, or a 128-k block) against the CPU reference on their
// dequantized weights; expert parallelism (a rank's expert range: local ids and other ranks'
// pairs skipped) against the CPU reference on every path, the ranks summing to the whole layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "core/error.h"
#include "cuda_test_util.h"
#include "model/tp_layout.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/fp8_weights.h"

namespace gs {
namespace {

using test::on;
using test::on_i32;
using test::randn;
using test::read;

std::vector<MoeRouting> routings() {
  MoeRouting mixtral{.num_experts = 64, .top_k = 8, .renormalize = true};
  MoeRouting v2{.num_experts = 64, .top_k = 6, .n_group = 8, .topk_group = 3, .scaling = 16.0f};
  MoeRouting v3{.score = MoeScore::Sigmoid,
                .num_experts = 64,
                .top_k = 8,
                .n_group = 8,
                .topk_group = 4,
                .group_key = MoeGroupKey::TopTwoSum,
                .renormalize = true,
                .scaling = 2.5f};
  MoeRouting qwen3{.num_experts = 128, .top_k = 8, .renormalize = true};
  MoeRouting wide{.num_experts = 160, .top_k = 6, .n_group = 8, .topk_group = 3, .scaling = 16.0f};
  MoeRouting odd{.num_experts = 30, .top_k = 3, .renormalize = true};  // keys read in quads past E
  return {mixtral, v2, v3, qwen3, wide, odd};
}

// The routing of `logits` [T, r.num_experts] (and bias, for sigmoid scores) on the GPU equals
// the CPU's: the same experts in the same order, weights within f32 rounding.
void expect_route_matches_cpu(const MoeRouting& r, int T, const std::vector<float>& logits,
                              const std::vector<float>& bias) {
  auto gpu = make_cuda_backend();
  auto cpu = make_cpu_backend();
  const int k = r.top_k, E = r.num_experts;
  const bool with_bias = r.score == MoeScore::Sigmoid;
  auto run = [&](Backend& b) {
    Tensor ids = Tensor::empty({T, k}, DType::I32, b.allocator()), w = Tensor::empty({T, k}, DType::F32, b.allocator());
    b.moe_route(on(b, logits, {T, E}, DType::F32), with_bias ? on(b, bias, {E}, DType::F32) : Tensor(), r, ids, w);
    return std::pair{read(b, ids), read(b, w)};
  };
  const auto [gi, gw] = run(*gpu);
  const auto [ci, cw] = run(*cpu);
  EXPECT_EQ(gi, ci);
  for (size_t i = 0; i < gw.size(); ++i)
    if (!std::isnan(cw[i])) {
      EXPECT_NEAR(gw[i], cw[i], 1e-5f * std::max(1.0f, std::fabs(cw[i])));
    }
}

TEST(MoeOps, RouteMatchesCpu) {
  GS_REQUIRE_GPU();
  const int T = 37;
  for (const MoeRouting& r : routings()) {
    SCOPED_TRACE(testing::Message() << r.num_experts << " experts, top " << r.top_k);
    const int E = r.num_experts;
    expect_route_matches_cpu(r, T, randn(size_t(T) * E, 1, 2.0f), randn(E, 2, 0.1f));
  }
}

// Ties pick the first expert; a NaN key is passed over unless it is the first expert not yet
// taken (the sequential rule of ops/moe.h), and every token still gets distinct experts.
TEST(MoeOps, RouteTiesAndNansMatchCpu) {
  GS_REQUIRE_GPU();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const MoeRouting& r : routings()) {
    SCOPED_TRACE(testing::Message() << r.num_experts << " experts, top " << r.top_k);
    const int E = r.num_experts, T = 4;
    std::vector<float> logits(size_t(T) * E, 0.5f);                    // token 0: all tied
    for (int e = 0; e < E; ++e) logits[size_t(E) + e] = float(e % 3);  // token 1: ties in threes
    for (int e = 0; e < E; e += 5) logits[size_t(2 * E) + e] = nan;    // token 2: NaNs, expert 0 first
    for (int e = 1; e < E; e += 7) logits[size_t(3 * E) + e] = nan;    // token 3: NaNs after a number
    expect_route_matches_cpu(r, T, logits, std::vector<float>(size_t(E), 0.0f));
  }
}

// One MoE layer's operands on a backend, from the same host data.
struct Layer {
  static constexpr int k = 4, kHidden = 256;
  int I, E, H;
  Tensor x, gu, down, logits, ids, w, shared, gate, act, pair_out, index, out;
  Tensor gu_bias, down_bias;       // gpt-oss: f32 expert biases, with the clamped SwiGLU
  Tensor workspace;                // the backend's (with_workspace), for its dense form
  std::optional<AddRmsNorm> then;  // the residual add + norm after the block (MoeExpertsArgs::then)
  GatedActivation fn = GatedActivation::Silu;
  // Expert parallelism: the rank's experts [first, first + held) (held 0: every expert), whose
  // weight rows and biases it reads (hold()).
  int first = 0, held = 0;
  Layer(Backend& b, int T, bool shared_expert, uint32_t seed, int width = 128, bool gpt_oss = false, int experts = 16,
        bool with_workspace = false, int hidden = kHidden)
      : I(width), E(experts), H(hidden) {
    const DType dt = b.compute_dtype();
    auto f32 = [&](Shape s) { return Tensor::empty(s, DType::F32, b.allocator()); };
    x = on(b, randn(size_t(T) * H, seed), {T, H}, dt);
    gu = on(b, randn(size_t(E) * 2 * I * H, 7, 0.06f), {E * 2 * I, H}, dt);
    down = on(b, randn(size_t(E) * H * I, 8, 0.09f), {E * H, I}, dt);
    logits = on(b, randn(size_t(T) * E, seed + 1, 2.0f), {T, E}, DType::F32);
    ids = Tensor::empty({T, k}, DType::I32, b.allocator());
    w = f32({T, k});
    if (shared_expert) {
      shared = on(b, randn(size_t(T) * H, seed + 2), {T, H}, dt);
      gate = on(b, randn(size_t(T) * 8, seed + 3), {T, 8}, DType::F32);
    }
    act = Tensor::empty({T * k, I}, dt, b.allocator());
    pair_out = f32({T * k, H});
    index = Tensor::empty({moe_index_elems(T, k, E)}, DType::I32, b.allocator());
    out = Tensor::empty({T, H}, dt, b.allocator());
    if (gpt_oss) {
      fn = GatedActivation::ClampedSwiglu;
      gu_bias = on(b, randn(size_t(E) * 2 * I, seed + 4, 0.5f), {E, 2 * I}, DType::F32);
      down_bias = on(b, randn(size_t(E) * H, seed + 5, 0.5f), {E, H}, DType::F32);
    }
    const int64_t ws = with_workspace ? b.moe_workspace_bytes(T, k, E, I, H, E) : 0;
    if (ws > 0) workspace = Tensor::empty({ws}, DType::U8, b.allocator());
  }
  // Makes this layer the expert-parallel rank holding experts `range`; a workspace is resized for them.
  void hold(Backend& b, const TpRange& range) {
    first = int(range.begin), held = int(range.count);
    if (!workspace.defined()) return;
    const int64_t ws = b.moe_workspace_bytes(x.dim(0), k, held, I, H, E);
    workspace = ws > 0 ? Tensor::empty({ws}, DType::U8, b.allocator()) : Tensor();
  }
  // Rows [first per, (first + n) per) of an expert-stacked tensor (undefined stays undefined).
  Tensor mine(const Tensor& t, int64_t per) const {
    const int64_t n = held > 0 ? held : E;
    return t.defined() ? t.rows(first * per, n * per) : t;
  }
  void forward(Backend& b) const {
    b.moe_route(
        logits, Tensor(),
        MoeRouting{.num_experts = E, .top_k = k, .renormalize = true, .first_expert = first, .local_experts = held},
        ids, w);
    b.moe_experts(MoeExpertsArgs{.act = fn,
                                 .swiglu_limit = 0.7f,  // binds: gate and up have std ~1
                                 .x = x,
                                 .gate_up = mine(gu, 2 * I),
                                 .down = mine(down, H),
                                 .ids = ids,
                                 .weights = w,
                                 .shared = shared,
                                 .shared_gate = gate,
                                 .act_scratch = act,
                                 .pair_out = pair_out,
                                 .index = index,
                                 .out = out,
                                 .gate_up_bias = mine(gu_bias, 1),
                                 .down_bias = mine(down_bias, 1),
                                 .workspace = workspace,
                                 .then = then,
                                 .routed_experts = E});
  }
};

// A graph of l's forward (T tokens, bf16), captured after an eager run and replayed after new
// router logits and x (from `seed`), gives what an eager run on them gives.
void expect_replay_follows_new_routing(Backend& b, Layer& l, int T, uint32_t seed) {
  l.forward(b);
  b.stream().begin_capture();
  l.forward(b);
  auto graph = b.stream().end_capture();
  b.copy(l.logits, on(b, randn(T * l.E, seed, 2.0f), {T, l.E}, DType::F32));
  b.copy(l.x, on(b, randn(T * l.H, seed + 1), {T, l.H}, DType::BF16));
  l.forward(b);
  const auto eager_ids = read(b, l.ids), eager = read(b, l.out);
  b.fill_zero(l.out);
  b.fill_zero(l.ids);
  graph->replay();
  EXPECT_EQ(read(b, l.ids), eager_ids);
  EXPECT_EQ(read(b, l.out), eager);
}

TEST(MoeOps, ExpertsMatchCpuFromOneTokenToMany) {
  GS_REQUIRE_GPU();
  auto gpu = make_cuda_backend(0, DType::BF16);
  auto cpu = make_cpu_backend();
  for (int T : {1, 5, 64, 300}) {
    for (bool shared : {false, true}) {
      SCOPED_TRACE(testing::Message() << "T " << T << " shared " << shared);
      Layer g(*gpu, T, shared, 20 + T), c(*cpu, T, shared, 20 + T);
      g.forward(*gpu);
      c.forward(*cpu);
      EXPECT_EQ(read(*gpu, g.ids), read(*cpu, c.ids));
      EXPECT_LT(test::rel_l2(read(*gpu, g.out), read(*cpu, c.out)), 1e-2);
    }
  }
}

// Expert widths that are not a multiple of the tensor-core kernel's 32-k granule (the fixtures'
// 40 and 48: the last granule is partial), in bf16 (tensor cores) and f32 (the grouped GEMVs); at
// 300 tokens (75 pairs an expert: bf16 items of 128 pairs, the tiled GEMM) with a hidden size of
// 264, so that both GEMMs end in a partial 64-k tile and a partial tile of outputs.
TEST(MoeOps, ExpertsMatchCpuAtOddWidthsInBothDtypes) {
  GS_REQUIRE_GPU();
  auto cpu = make_cpu_backend();
  for (DType dt : {DType::BF16, DType::F32}) {
    auto gpu = make_cuda_backend(0, dt);
    for (int I : {40, 48, 200}) {
      for (int T : {1, 33, 300}) {
        SCOPED_TRACE(testing::Message() << dtype_name(dt) << " I " << I << " T " << T);
        const int H = T == 300 ? 264 : Layer::kHidden;
        Layer g(*gpu, T, T > 1, 50 + T, I, false, 16, false, H), c(*cpu, T, T > 1, 50 + T, I, false, 16, false, H);
        g.forward(*gpu);
        c.forward(*cpu);
        EXPECT_EQ(read(*gpu, g.ids), read(*cpu, c.ids));
        EXPECT_LT(test::rel_l2(read(*gpu, g.out), read(*cpu, c.out)), dt == DType::F32 ? 1e-5 : 1e-2);
      }
    }
  }
}

// gpt-oss's experts: biases on gate/up and down, the clamped SwiGLU (moe_gate_up's and moe_down's
// epilogues).
TEST(MoeOps, GptOssBiasesAndClampedSwigluMatchCpu) {
  GS_REQUIRE_GPU();
  auto gpu = make_cuda_backend(0, DType::BF16);
  auto cpu = make_cpu_backend();
  for (int T : {1, 64, 300}) {  // 300: the tiled GEMM's epilogues
    SCOPED_TRACE(testing::Message() << "T " << T);
    Layer g(*gpu, T, false, 60 + T, 128, true), c(*cpu, T, false, 60 + T, 128, true);
    g.forward(*gpu);
    c.forward(*cpu);
    EXPECT_EQ(read(*gpu, g.ids), read(*cpu, c.ids));
    EXPECT_LT(test::rel_l2(read(*gpu, g.out), read(*cpu, c.out)), 1e-2);
  }
}

// The residual add + next norm after the experts at one token (MoeExpertsArgs::then). Where the
// backend hands the norm off (LinearKernelOptions::norm_handoff_min_k / max_k, here at every
// hidden size) the small-batch path's fold adds into the residual and stores x = residual *
// norm_w, and the QKV projection after it computes the norm (with and without the q/k head norm);
// elsewhere add_rms_norm runs and the projection reads its normed row. The residual is the same
// bit for bit both ways; q / k / v are within x's rounding of the plain form's (and differ from
// them: the handoff ran) and near the CPU reference's; the plain form equals the experts,
// add_rms_norm and the projection of x run apart, bit for bit. The same with an FP8 QKV weight (a
// scale a row, or 128x128 blocks; the CPU on its dequantized values) where the head-norm GEMV reads
// the handoff: with the q/k norm at one token (Backend::reads_norm_handoff).
TEST(MoeOps, NormHandoffAfterTheExpertsMatchesAddRmsNorm) {
  GS_REQUIRE_GPU();
  KernelOptions every_k, off;
  every_k.linear.norm_handoff_min_k = 0;
  off.linear.norm_handoff_max_k = 0;
  const auto handoff = make_cuda_backend(0, DType::BF16, every_k), plain = make_cuda_backend(0, DType::BF16, off);
  const auto cpu = make_cpu_backend();
  ASSERT_TRUE(handoff->moe_norm_handoff(1, Layer::kHidden));
  ASSERT_FALSE(plain->moe_norm_handoff(1, Layer::kHidden));
  constexpr int H = Layer::kHidden, D = 128, hq = 4, hkv = 2, W = (hq + 2 * hkv) * D;
  const float eps = 1e-5f;
  const auto r0 = randn(H, 90), g0 = randn(H, 91), wq0 = randn(size_t(W) * H, 92, 0.05f);
  const auto qn0 = randn(D, 93), kn0 = randn(D, 94);
  RopeConfig cfg;
  cfg.head_dim = D;
  // fp8: 0 none, 1 a scale a row, 2 128x128 blocks
  for (const auto& [shared, qk_norm, fp8] : {std::tuple{false, false, 0},
                                             {false, true, 0},
                                             {true, false, 0},
                                             {true, true, 0},
                                             {false, true, 1},
                                             {true, true, 1},
                                             {true, true, 2}}) {
    SCOPED_TRACE(testing::Message() << "shared " << shared << " q/k norm " << qk_norm << " fp8 " << fp8);
    const int64_t G = fp8 == 2 ? H / kFp8BlockK : 1;
    std::vector<uint8_t> wq8(wq0.size());
    std::vector<float> wq_scales(static_cast<size_t>(W * G)), wq_deq(wq0.size());
    if (fp8)
      fp8_quantize_host(wq0.data(), W, H, G > 1 ? kFp8BlockK : 1, G > 1, wq8.data(), wq_scales.data(), wq_deq.data());
    const Tensor fp8_w = fp8 ? Tensor::empty({W, H}, DType::F8E4M3, handoff->allocator())
                                   .with_scales(on(*handoff, wq_scales, {W, G}, DType::F32))
                             : Tensor();
    if (fp8_w.defined()) {
      handoff->copy(fp8_w, Tensor::wrap(wq8.data(), {W, H}, DType::F8E4M3, Device::cpu()));
      handoff->stream().synchronize();
      ASSERT_TRUE(handoff->reads_norm_handoff(fp8_w, 1, D));
      ASSERT_FALSE(handoff->reads_norm_handoff(fp8_w, 1, 0));
    }
    // The residual, q, k and v after the block on `be`; apart: the block without `then`, then
    // add_rms_norm and the projection of its output.
    const auto run = [&](Backend& be, bool apart) {
      const DType d = be.compute_dtype();
      Layer l(be, 1, shared, 95);
      const Tensor r = on(be, r0, {1, H}, DType::F32), g = on(be, g0, {H}, d);
      const Tensor x = Tensor::empty({1, H}, d, be.allocator());
      const Tensor wq = !fp8 ? on(be, wq0, {W, H}, d) : d == DType::F32 ? on(be, wq_deq, {W, H}, d) : fp8_w;
      const Tensor q = Tensor::empty({1, hq * D}, d, be.allocator()),
                   k = Tensor::empty({1, hkv * D}, d, be.allocator()),
                   v = Tensor::empty({1, hkv * D}, d, be.allocator());
      const Tensor qn = qk_norm ? on(be, qn0, {D}, d) : Tensor(), kn = qk_norm ? on(be, kn0, {D}, d) : Tensor();
      const Tensor pos = on_i32(be, std::vector<int32_t>{77}, {1}), y = Tensor::empty({1, W}, d, be.allocator());
      // Nothing is enqueued between the block and the projection, as in the model's step.
      if (!apart) l.then = AddRmsNorm{r, g, eps, x};
      l.forward(be);
      if (apart) be.add_rms_norm(r, l.out, g, eps, x);
      be.linear({.x = x,
                 .norm = apart ? std::nullopt : std::optional(RmsNormInput{r, g, eps}),
                 .w = wq,
                 .y = y,
                 .then = SplitQkvRope{pos, &cfg, qn, kn, eps, q, k, v}});
      return std::vector<std::vector<float>>{read(be, r), read(be, q), read(be, k), read(be, v)};
    };
    const auto h = run(*handoff, false), p = run(*plain, false), c = run(*cpu, false);
    EXPECT_EQ(p, run(*plain, true));
    EXPECT_EQ(h[0], p[0]);
    for (size_t i = 1; i < h.size(); ++i) {
      EXPECT_LT(test::rel_l2(h[i], p[i]), 5e-3) << "output " << i;
      EXPECT_NE(h[i], p[i]) << "output " << i << ": the handoff did not run";
      EXPECT_LT(test::rel_l2(h[i], c[i]), 2e-2) << "output " << i;
    }
    EXPECT_LT(test::rel_l2(h[0], c[0]), 1e-2);
  }
}

TEST(MoeOps, GraphReplayFollowsNewRouting) {
  GS_REQUIRE_GPU();
  auto gpu = make_cuda_backend(0, DType::BF16);
  for (int T : {1, 8}) {  // the small-batch path and the sorted one
    SCOPED_TRACE(testing::Message() << "T " << T);
    Layer l(*gpu, T, true, 40);
    expect_replay_follows_new_routing(*gpu, l, T, 41);
  }
}

// The small-batch path (MoeKernelOptions::direct_max_tokens) gives the sorted path's output bit
// for bit, at one token and at a few whose pairs may share an expert, with and without the gated
// shared expert, and again on a graph replayed twice (its reduce counters are zeroed each run);
// also under expert parallelism, on each of 2 ranks holding 32 of the 64 experts (the small-batch
// path up to 2 tokens; a CTA of another rank's pair computes nothing yet counts for the fold).
TEST(MoeOps, SmallBatchPathEqualsSortedPath) {
  GS_REQUIRE_GPU();
  auto direct = make_cuda_backend(0, DType::BF16);
  KernelOptions off;
  off.moe.direct_max_tokens = 0;
  auto sorted = make_cuda_backend(0, DType::BF16, off);
  auto cpu = make_cpu_backend();
  constexpr int E = 64;  // 4 T k <= E up to 4 tokens
  for (int T : {1, 2, 3, 4}) {
    for (int v = 0; v < 6; ++v) {
      const bool shared = v % 2 == 1;
      const int rank = v / 2 - 1;  // -1: every expert; else the rank of 2 (expert parallelism)
      SCOPED_TRACE(testing::Message() << "T " << T << " shared " << shared << " rank " << rank);
      Layer d(*direct, T, shared, 70 + T, 128, false, E), o(*sorted, T, shared, 70 + T, 128, false, E);
      Layer c(*cpu, T, shared, 70 + T, 128, false, E);
      if (rank >= 0) {
        d.hold(*direct, expert_range(E, rank, 2));
        o.hold(*sorted, expert_range(E, rank, 2));
        c.hold(*cpu, expert_range(E, rank, 2));
      }
      d.forward(*direct);
      o.forward(*sorted);
      c.forward(*cpu);
      const auto out = read(*direct, d.out);
      EXPECT_EQ(read(*direct, d.ids), read(*cpu, c.ids));
      EXPECT_EQ(out, read(*sorted, o.out));
      EXPECT_LT(test::rel_l2(out, read(*cpu, c.out)), 1e-2);
      direct->fill_zero(d.out);
      direct->stream().begin_capture();
      d.forward(*direct);
      auto graph = direct->stream().end_capture();
      for (int replay = 0; replay < 2; ++replay) {
        graph->replay();
        EXPECT_EQ(read(*direct, d.out), out);
      }
    }
  }
}

// The dense form (MoeKernelOptions::dense_max_tokens: every expert on every token through
// cuBLASLt, then each token's selected rows summed) against the CPU reference and the grouped
// GEMMs, plain, with the gated shared expert, and with gpt-oss's biases and clamped SwiGLU; and a
// graph of it replayed after the routing changed equals an eager run.
TEST(MoeOps, DenseFormMatchesCpuAndGroupedGemms) {
  GS_REQUIRE_GPU();
  KernelOptions every;  // dense from T k >= E (4 tokens of 16 experts, top 4)
  every.moe.dense_min_pairs_per_expert = 1;
  KernelOptions never;
  never.moe.dense_max_tokens = 0;
  auto dense = make_cuda_backend(0, DType::BF16, every);
  auto grouped = make_cuda_backend(0, DType::BF16, never);
  auto cpu = make_cpu_backend();
  EXPECT_EQ(grouped->moe_workspace_bytes(256, 4, 16, 128, 256, 16), 0);
  EXPECT_EQ(dense->moe_workspace_bytes(3, 4, 16, 128, 256, 16), 0);  // 12 pairs over 16 experts
  // The defaults: mixtral-8x7b's shape from 64 tokens (16 pairs an expert), gpt-oss-20b's from
  // 128, never qwen3-30b-a3b's (128 experts, top 8: 16 times the multiply-adds).
  auto defaults = make_cuda_backend(0, DType::BF16);
  EXPECT_EQ(defaults->moe_workspace_bytes(63, 2, 8, 14336, 4096, 8), 0);
  EXPECT_GT(defaults->moe_workspace_bytes(64, 2, 8, 14336, 4096, 8), 0);
  EXPECT_GT(defaults->moe_workspace_bytes(128, 4, 32, 2880, 2880, 32), 0);
  EXPECT_EQ(defaults->moe_workspace_bytes(4096, 8, 128, 768, 2048, 128), 0);
  // Under expert parallelism the choice is the whole layer's (a rank's experts get its share of the
  // pairs): Mixtral's 4 of 8 experts from 64 tokens, not 32; a quarter of qwen3-30b-a3b's never.
  EXPECT_EQ(defaults->moe_workspace_bytes(63, 2, 4, 14336, 4096, 8), 0);
  EXPECT_GT(defaults->moe_workspace_bytes(64, 2, 4, 14336, 4096, 8), 0);
  EXPECT_EQ(defaults->moe_workspace_bytes(4096, 8, 32, 768, 2048, 128), 0);
  for (int T : {4, 37, 256}) {
    for (int variant = 0; variant < 3; ++variant) {
      const bool shared = variant == 1, gpt_oss = variant == 2;
      SCOPED_TRACE(testing::Message() << "T " << T << (shared ? " shared" : "") << (gpt_oss ? " gpt-oss" : ""));
      const uint32_t seed = 80 + T + variant;
      Layer d(*dense, T, shared, seed, 128, gpt_oss, 16, true), g(*grouped, T, shared, seed, 128, gpt_oss, 16, true);
      Layer c(*cpu, T, shared, seed, 128, gpt_oss);
      ASSERT_TRUE(d.workspace.defined());
      ASSERT_FALSE(g.workspace.defined());
      dense->fill_zero(d.workspace);
      d.forward(*dense);
      g.forward(*grouped);
      c.forward(*cpu);
      CpuAllocator host;
      Tensor ws = Tensor::empty(d.workspace.shape(), DType::U8, host);
      dense->copy(ws, d.workspace);
      dense->stream().synchronize();
      const uint8_t* bytes = ws.data_as<uint8_t>();
      EXPECT_TRUE(std::any_of(bytes, bytes + ws.numel(), [](uint8_t b) { return b != 0; }))
          << "the dense form did not run";
      const auto out = read(*dense, d.out);
      EXPECT_EQ(read(*dense, d.ids), read(*cpu, c.ids));
      EXPECT_LT(test::rel_l2(out, read(*cpu, c.out)), 1e-2);
      EXPECT_LT(test::rel_l2(out, read(*grouped, g.out)), 1e-2);
    }
  }
  Layer l(*dense, 64, true, 90, 128, false, 16, true);
  expect_replay_follows_new_routing(*dense, l, 64, 91);
}

// Expert weights [rows, K] whose scales matter: each row and each 128-k block of it has its own
// magnitude (rows over a range of 2.3x, blocks 0.5x, 1x, 2x in turn), so a scale applied to the
// wrong row or block moves the output by O(1).
std::vector<float> scaled_weights(int64_t rows, int64_t K, uint32_t seed) {
  std::vector<float> w = randn(size_t(rows * K), seed, 0.06f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < K; ++k)
      w[size_t(r * K + k)] *= (0.3f + 0.1f * float(r % 14)) * std::ldexp(1.0f, int(k / 128 % 3) - 1);
  return w;
}

// The layer's experts as FP8 on `gpu` (e4m3 bytes and scales from the host quantization) and as
// their exact dequantized values on `cpu`.
void quantize_experts(Backend& gpu, Layer& g, Backend& cpu, Layer& c, bool block) {
  const auto one = [&](Tensor& gw, Tensor& cw, uint32_t seed) {
    const int64_t rows = gw.dim(0), K = gw.row_elems(), G = block ? K / 128 : 1;
    const std::vector<float> w = scaled_weights(rows, K, seed);
    std::vector<uint8_t> q(w.size());
    std::vector<float> scales(size_t(rows * G)), deq(w.size());
    fp8_quantize_host(w.data(), rows, K, block ? 128 : 1, block, q.data(), scales.data(), deq.data());
    gw = Tensor::empty({rows, K}, DType::F8E4M3, gpu.allocator()).with_scales(on(gpu, scales, {rows, G}, DType::F32));
    gpu.copy(gw, Tensor::wrap(q.data(), {rows, K}, DType::F8E4M3, Device::cpu()));
    gpu.stream().synchronize();
    cw = on(cpu, deq, {rows, K}, DType::F32);
  };
  one(g.gu, c.gu, 17);
  one(g.down, c.down, 18);
}

// FP8 experts (e4m3 rows widened in registers, each 128-k block's products scaled apart) at one
// token (the small-batch path) and at 5, 24 and 300 (the sorted path's items of 8, 16 and 32
// pairs, the last staging x; with a scale a row, 300 makes items of 128 on the tiled GEMM, its
// e4m3 tiles widened in shared memory and the row scales applied to the sums), with the gated
// shared expert and gpt-oss's biases, equal the CPU
// reference on their dequantized weights within bf16 rounding; a graph of them replays after the
// routing changed as an eager run does.
TEST(MoeOps, Fp8ExpertsMatchCpuOnTheirDequantizedWeights) {
  GS_REQUIRE_GPU();
  auto gpu = make_cuda_backend(0, DType::BF16);
  auto cpu = make_cpu_backend();
  for (bool block : {false, true}) {
    for (int T : {1, 5, 24, 300}) {
      const bool shared = T % 2 == 1, gpt_oss = T == 24;
      SCOPED_TRACE(testing::Message() << (block ? "128-k blocks" : "a scale a row") << ", T " << T);
      Layer g(*gpu, T, shared, 100 + T, 128, gpt_oss, 16, true), c(*cpu, T, shared, 100 + T, 128, gpt_oss);
      quantize_experts(*gpu, g, *cpu, c, block);
      g.forward(*gpu);
      c.forward(*cpu);
      EXPECT_EQ(read(*gpu, g.ids), read(*cpu, c.ids));
      EXPECT_LT(test::rel_l2(read(*gpu, g.out), read(*cpu, c.out)), 1e-2);
    }
    Layer l(*gpu, 8, true, 110), unused(*cpu, 8, true, 110);
    quantize_experts(*gpu, l, *cpu, unused, block);
    expect_replay_follows_new_routing(*gpu, l, 8, 111);
  }
}

// The same at an 8B model's hidden size (4096, experts 1024 wide), where a warp's K share is
// several steps long (8 of gate_up's, 4 of down's): the steps in flight rotate through the
// register sets, at one token (the small-batch path) and at 3 (the sorted path's items of 8 pairs);
// at 300 tokens (items of 128: with a scale a row the tiled GEMM, 64 and 16 k-tiles through its ring).
TEST(MoeOps, Fp8ExpertsAtModelWidthsMatchCpu) {
  GS_REQUIRE_GPU();
  auto gpu = make_cuda_backend(0, DType::BF16);
  auto cpu = make_cpu_backend();
  constexpr int I = 1024, E = 4, H = 4096;
  for (bool block : {false, true}) {
    for (int T : {1, 3, 300}) {
      SCOPED_TRACE(testing::Message() << (block ? "128-k blocks" : "a scale a row") << ", T " << T);
      Layer g(*gpu, T, false, 120 + T, I, false, E, true, H), c(*cpu, T, false, 120 + T, I, false, E, false, H);
      quantize_experts(*gpu, g, *cpu, c, block);
      g.forward(*gpu);
      c.forward(*cpu);
      EXPECT_EQ(read(*gpu, g.ids), read(*cpu, c.ids));
      EXPECT_LT(test::rel_l2(read(*gpu, g.out), read(*cpu, c.out)), 1e-2);
    }
  }
}

// FP8 experts the kernels cannot take are refused by name: K not a multiple of 128, f32 compute.
TEST(MoeOps, Fp8ExpertsOutsideTheKernelsAreRefused) {
  GS_REQUIRE_GPU();
  auto cpu = make_cpu_backend();
  for (DType dt : {DType::BF16, DType::F32}) {
    auto gpu = make_cuda_backend(0, dt);
    const int I = dt == DType::BF16 ? 200 : 128;  // bf16: the expert width; f32: the dtype
    Layer g(*gpu, 1, false, 120, I), c(*cpu, 1, false, 120, I);
    quantize_experts(*gpu, g, *cpu, c, false);
    try {
      g.forward(*gpu);
      FAIL() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("FP8 experts need bf16 compute"), std::string::npos) << e.what();
    }
  }
}

// Expert parallelism's routing: for every routing (both kernels, the NaN fallback included) and
// every rank of vLLM's linear placement over 3 ranks (uneven: 22 + 21 + 21 of 64 experts, ...),
// the GPU's local ids, kMoeOtherRank and weights equal the CPU's.
TEST(MoeOps, RouteWithAnExpertRangeMatchesCpu) {
  GS_REQUIRE_GPU();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (MoeRouting r : routings()) {
    const int E = r.num_experts, T = 37;
    std::vector<float> logits = randn(size_t(T) * E, 3, 2.0f);
    for (int e = 0; e < E; e += 5) logits[size_t(E) + e] = nan;    // token 1: the NaN fallback
    for (int e = 0; e < E; ++e) logits[size_t(2 * E) + e] = 0.5f;  // token 2: all tied
    for (int rank = 0; rank < 3; ++rank) {
      const TpRange held = expert_range(E, rank, 3);
      SCOPED_TRACE(testing::Message() << E << " experts, top " << r.top_k << ", rank " << rank);
      r.first_expert = int(held.begin), r.local_experts = int(held.count);
      expect_route_matches_cpu(r, T, logits, randn(E, 4, 0.1f));
    }
  }
}

// The layer of `E` experts as ranks [0, ranks) hold it, on `gpu` against the CPU reference: each
// rank's ids equal and output within bf16 (f32: 1e-5) rounding, and the ranks' outputs sum to the
// GPU's whole layer. With `own_first_token`, token 0 is routed to experts 0..3, so the last rank
// computes none of its pairs (every CTA of the small-batch path still arrives for the fold).
struct EpCase {
  int T, E, ranks;
  bool shared = false, gpt_oss = false, fp8 = false, workspace = false, own_first_token = false;
};

void expect_ranks_match_cpu(Backend& gpu, const EpCase& p, uint32_t seed) {
  auto cpu = make_cpu_backend();
  const bool f32 = gpu.compute_dtype() == DType::F32;
  auto layer = [&](Backend& b) {
    Layer l(b, p.T, p.shared, seed, 128, p.gpt_oss, p.E, p.workspace && &b == &gpu);
    if (p.own_first_token) {
      std::vector<float> lg = read(b, l.logits);
      for (int e = 0; e < p.E; ++e) lg[size_t(e)] = e < Layer::k ? 10.0f - float(e) : -10.0f;
      b.copy(l.logits, on(b, lg, {p.T, p.E}, DType::F32));
    }
    return l;
  };
  Layer whole_g = layer(gpu), whole_c = layer(*cpu);
  if (p.fp8) quantize_experts(gpu, whole_g, *cpu, whole_c, true);
  whole_g.forward(gpu);
  const std::vector<float> whole = read(gpu, whole_g.out);
  std::vector<float> sum(whole.size(), 0.0f);
  for (int rank = 0; rank < p.ranks; ++rank) {
    SCOPED_TRACE(testing::Message() << "rank " << rank << " of " << p.ranks);
    const TpRange range = expert_range(p.E, rank, p.ranks);
    Layer g = layer(gpu), c = layer(*cpu);
    if (p.fp8) quantize_experts(gpu, g, *cpu, c, true);
    g.hold(gpu, range);
    c.hold(*cpu, range);
    if (p.workspace) {
      ASSERT_TRUE(g.workspace.defined()) << "the dense form does not apply";
    }
    g.forward(gpu);
    c.forward(*cpu);
    const std::vector<float> ids = read(gpu, g.ids), out = read(gpu, g.out);
    EXPECT_EQ(ids, read(*cpu, c.ids));
    EXPECT_LT(test::rel_l2(out, read(*cpu, c.out)), f32 ? 1e-5 : 1e-2);
    if (p.own_first_token && rank == p.ranks - 1) {
      for (int j = 0; j < Layer::k; ++j) EXPECT_EQ(ids[size_t(j)], float(kMoeOtherRank));
    }
    // The shared expert is every rank's whole here (the model splits it on its width instead).
    const std::vector<float> shared = p.shared && rank > 0 ? read(gpu, g.shared) : std::vector<float>();
    const std::vector<float> gate = p.shared && rank > 0 ? read(gpu, g.gate) : std::vector<float>();
    for (size_t i = 0; i < sum.size(); ++i) {
      float s = out[i];
      if (!shared.empty()) s -= shared[i] / (1.0f + std::exp(-gate[i / Layer::kHidden * 8]));
      sum[i] += s;
    }
  }
  EXPECT_LT(test::rel_l2(sum, whole), f32 ? 1e-5 : 2e-2);
}

// Every path of moe_experts with other ranks' pairs in the routing: the small-batch path (one
// token, with the last rank owning none of its pairs; two tokens over 32 local experts), the sorted
// grouped GEMMs at a few token counts (items of 8 to 128 pairs), the dense form, f32's grouped
// GEMVs, FP8 experts; with the gated shared expert and gpt-oss's biases (each rank adding its own
// experts' down biases); over 2 ranks and an uneven 3.
TEST(MoeOps, ExpertParallelRanksMatchCpuOnEveryPath) {
  GS_REQUIRE_GPU();
  auto bf16 = make_cuda_backend(0, DType::BF16);
  KernelOptions every;
  every.moe.dense_min_pairs_per_expert = 1;
  auto dense = make_cuda_backend(0, DType::BF16, every);
  auto f32 = make_cuda_backend(0, DType::F32);
  struct Run {
    Backend* b;
    const char* path;
    EpCase p;
  };
  const Run runs[] = {
      {bf16.get(), "small batch, one token", {1, 16, 2, true, false, false, false, true}},
      {bf16.get(), "small batch, one token, gpt-oss", {1, 16, 3, false, true, false, false, true}},
      {bf16.get(), "small batch, two tokens", {2, 64, 2, true}},
      {bf16.get(), "sorted, 5 tokens", {5, 16, 2, true}},
      {bf16.get(), "sorted, 64 tokens", {64, 16, 3, false, true}},
      {bf16.get(), "sorted, 300 tokens", {300, 64, 3, true}},
      {dense.get(), "dense, 37 tokens", {37, 16, 2, true, false, false, true}},
      {dense.get(), "dense, 256 tokens, gpt-oss", {256, 16, 3, false, true, false, true}},
      {f32.get(), "f32 GEMVs", {33, 16, 3, true}},
      {bf16.get(), "FP8, one token", {1, 16, 2, true, false, true, false, true}},
      {bf16.get(), "FP8, 24 tokens", {24, 16, 3, false, true, true}},
  };
  uint32_t seed = 130;
  for (const Run& r : runs) {
    SCOPED_TRACE(r.path);
    expect_ranks_match_cpu(*r.b, r.p, seed++);
  }
}

// A rank's captured graph, replayed after the routing changed (other pairs now local, others now
// another rank's), equals an eager run: the small-batch path, the sorted one, the dense form.
TEST(MoeOps, ExpertParallelGraphReplayFollowsNewRouting) {
  GS_REQUIRE_GPU();
  KernelOptions every;
  every.moe.dense_min_pairs_per_expert = 1;
  auto gpu = make_cuda_backend(0, DType::BF16);
  auto dense = make_cuda_backend(0, DType::BF16, every);
  for (const auto& [b, T] : {std::pair{gpu.get(), 1}, std::pair{gpu.get(), 8}, std::pair{dense.get(), 64}}) {
    SCOPED_TRACE(testing::Message() << "T " << T);
    Layer l(*b, T, true, 150, 128, false, 16, b == dense.get());
    l.hold(*b, expert_range(16, 1, 3));
    expect_replay_follows_new_routing(*b, l, T, 151);
  }
}

}  // namespace
}  // namespace gs
