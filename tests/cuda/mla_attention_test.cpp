// Multi-head latent attention on the GPU: the CUDA backend (absorbed form for every request)
// against the CPU reference (absorbed decode, expanded prefill) on a mixed batch over a cache
// that already holds earlier tokens and on a long context (with and without context splits),
// in f32 and bf16; then the DeepSeek fixtures through the
// ModelRunner in FULL_AND_PIECEWISE: f32 greedy tokens equal to HF's, bf16 close; and
// --quantization fp8's FP8 experts against the CPU reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "attention/cuda/cuda_mla_attention.h"
#include "cuda_test_util.h"
#include "model/checkpoint_writer.h"
#include "model/family_fixtures.h"
#include "ops/cuda/cuda_backend.h"
#include "runner/model_runner.h"
#include "runner/serving_sim.h"

namespace gs {
namespace {

// 20 heads: a full group of 16 and a partial one; YaRN-like rope scale, interleaved pairs.
MlaShape test_shape() {
  MlaShape s{.num_heads = 20,
             .kv_lora_rank = 64,
             .qk_nope_head_dim = 32,
             .qk_rope_head_dim = 16,
             .v_head_dim = 24,
             .rope = {}};
  s.scale = 0.15f;
  s.rope_scale = 1.1f;
  s.rope.head_dim = 16;
  s.rope.theta = 10000.0f;
  return s;
}

// DeepSeek-V2-Lite's attention: 16 heads, kv_lora_rank 512, nope 128, rope 64, v 128.
MlaShape lite_shape() {
  MlaShape s{.num_heads = 16,
             .kv_lora_rank = 512,
             .qk_nope_head_dim = 128,
             .qk_rope_head_dim = 64,
             .v_head_dim = 128,
             .rope = {}};
  s.scale = 0.1f;
  s.rope.head_dim = 64;
  s.rope.theta = 10000.0f;
  return s;
}

struct Batch {
  std::vector<int32_t> qsl, seq_lens, slots, positions, block_table;
  int num_tokens = 0;
};

// One step of requests with ctx[r] cached tokens taking n[r] new ones, then `padded` padded tokens.
// Blocks of 4, scattered: request r's k-th block is (k R + r) 7 mod num_blocks (7 coprime to it).
struct Scenario {
  int num_blocks, max_blocks;
  std::vector<std::vector<int>> ctx, n;  // per step, per request
  std::vector<int> padded;               // per step
};

Batch step(const Scenario& sc, size_t which) {
  const int R = int(sc.n[which].size()), mb = sc.max_blocks;
  Batch b;
  b.block_table.assign(size_t(R * mb), 0);
  for (int r = 0; r < R; ++r)
    for (int k = 0; k < mb; ++k) b.block_table[size_t(r * mb + k)] = (k * R + r) * 7 % sc.num_blocks;
  b.qsl.push_back(0);
  for (int r = 0; r < R; ++r) {
    const int start = sc.ctx[which][size_t(r)], n = sc.n[which][size_t(r)];
    for (int i = 0; i < n; ++i) {
      const int p = start + i;
      b.positions.push_back(p);
      b.slots.push_back(b.block_table[size_t(r * mb + p / 4)] * 4 + p % 4);
    }
    b.qsl.push_back(b.qsl.back() + n);
    b.seq_lens.push_back(start + n);
  }
  b.num_tokens = b.qsl.back() + sc.padded[which];
  while (int(b.slots.size()) < b.num_tokens) b.slots.push_back(-1), b.positions.push_back(0);
  return b;
}

// Step 1: three requests prefill 5, 9 and 3 tokens; step 2: request 0 prefills 7 more (a chunk
// over cached context), requests 1 and 2 decode one token each, two padded tokens.
Scenario mixed() { return {40, 6, {{0, 0, 0}, {5, 9, 3}}, {{5, 9, 3}, {7, 1, 1}}, {0, 2}}; }
// Step 1: one request prefills 200 tokens (enough CTAs without splitting the context); step 2:
// it decodes one token with one padded token (its 201 rows split over many CTAs).
Scenario long_context() { return {64, 51, {{0}, {200}}, {{200}, {1}}, {0, 1}}; }
// Step 1: one request prefills 40 tokens; step 2: it prefills 152 more over them (a chunk of a long
// prompt) with 8 padded tokens, 160 in all: bf16 launches that long run absorption and W_UV as
// cuBLASLt GEMMs (cuda_mla_attention.cpp), so step 2's output is theirs.
Scenario long_chunk() { return {64, 51, {{0}, {40}}, {{40}, {152}}, {0, 8}}; }
// Step 1: three requests prefill 70, 30 and 10 tokens; step 2: request 0 decodes one token while
// requests 1 and 2 take chunks of 150 and 130 (the expanded form's two requests after an absorbed
// one in an eager step), three padded tokens.
Scenario decode_then_chunks() { return {150, 48, {{0, 0, 0}, {70, 30, 10}}, {{70, 30, 10}, {1, 150, 130}}, {0, 3}}; }

// Runs the scenario's steps on `backend` with `mla`, over a cache of dt, or of e4m3 at `e4m3_scale`
// where it is > 0; returns the last step's output [T, H v] as f32. `eager`: the metadata carries
// the host's copies of the batch, as the runner's NONE and PIECEWISE steps do (a FULL graph's do not).
std::vector<float> run(Backend& be, MlaAttentionBackend& mla, DType dt, const Scenario& sc, const MlaShape& s,
                       float e4m3_scale = 0.0f, bool eager = false) {
  const int H = s.num_heads, T = 320;
  auto dev_i32 = [&](const std::vector<int32_t>& v) { return test::on_i32(be, v, {int64_t(v.size())}); };
  const Tensor kv_a_norm = test::on(be, test::randn(size_t(s.kv_lora_rank), 3, 0.3f), {s.kv_lora_rank}, dt);
  const Tensor kv_b =
      test::on(be, test::randn(size_t(H * (s.qk_nope_head_dim + s.v_head_dim) * s.kv_lora_rank), 4, 0.2f),
               {H * (s.qk_nope_head_dim + s.v_head_dim), s.kv_lora_rank}, dt);
  KVCacheLayer cache{
      Tensor::empty({sc.num_blocks, 4, 1, s.latent_dim()}, e4m3_scale > 0 ? DType::F8E4M3 : dt, be.allocator()),
      Tensor()};
  if (e4m3_scale > 0) cache.k_scale = e4m3_scale;
  be.fill_zero(cache.k);
  const Tensor q_latent = Tensor::empty({T, H * s.latent_dim()}, DType::F32, be.allocator());
  const Tensor o_latent = Tensor::empty({T, H * s.kv_lora_rank}, DType::F32, be.allocator());
  std::vector<float> out;
  for (size_t which = 0; which < sc.n.size(); ++which) {
    const Batch b = step(sc, which);
    const int n = b.num_tokens, R = int(sc.n[which].size());
    AttentionMetadata md;
    md.query_start_loc = dev_i32(b.qsl), md.seq_lens = dev_i32(b.seq_lens);
    md.block_table = dev_i32(b.block_table), md.slot_mapping = dev_i32(b.slots);
    md.block_size = 4, md.max_blocks_per_req = sc.max_blocks, md.num_reqs = md.num_reqs_padded = R;
    if (eager) md.host_query_start_loc = b.qsl, md.host_seq_lens = b.seq_lens;
    MlaForwardArgs a;
    const uint64_t seed = 11 + which;
    a.q = test::on(be, test::randn(size_t(n * H * s.qk_head_dim()), seed), {n, H * s.qk_head_dim()}, dt);
    a.kv_a = test::on(be, test::randn(size_t(n * s.latent_dim()), 10 + seed), {n, s.latent_dim()}, dt);
    a.kv_a_norm = kv_a_norm, a.kv_b = kv_b, a.positions = dev_i32(b.positions);
    a.out = Tensor::empty({n, H * s.v_head_dim}, dt, be.allocator());
    a.q_latent = q_latent.rows(0, n), a.o_latent = o_latent.rows(0, n);
    mla.forward_mla(a, cache, md);
    out = test::read(be, a.out);
  }
  return out;
}

// The CUDA backend against the CPU reference on `sc`, in f32 (the CUDA-core attend) and bf16
// (tensor cores where `bf16_tensor_cores`, else the CUDA-core attend), bf16 both as a FULL graph
// and as an eager step runs it (the expanded form for long queries where the shape has it);
// padded tokens get zero rows.
void expect_matches_cpu(const Scenario& sc, const MlaShape& shape, bool bf16_tensor_cores) {
  auto cpu = make_cpu_backend();
  auto ref_mla = make_mla_attention(*cpu, shape);
  const std::vector<float> ref = run(*cpu, *ref_mla, DType::F32, sc, shape);
  for (DType dt : {DType::F32, DType::BF16}) {
    auto gpu = make_cuda_backend(0, dt);
    auto mla = make_cuda_mla_attention(*gpu, shape);
    EXPECT_EQ(mla->cudagraph_support(), AttentionCGSupport::ALWAYS);
    const bool tensor_cores = dt == DType::BF16 && bf16_tensor_cores;
    const bool expanded =
        dt == DType::BF16 && shape.qk_nope_head_dim == 128 && shape.qk_rope_head_dim == 64 && shape.v_head_dim == 128;
    EXPECT_EQ(mla->name(), expanded       ? "mla-cuda (tensor-core attend, expanded prefill)"
                           : tensor_cores ? "mla-cuda (tensor-core attend)"
                                          : "mla-cuda");
    for (const bool eager : {false, true}) {
      if (eager && dt != DType::BF16) break;
      const std::vector<float> got = run(*gpu, *mla, dt, sc, shape, 0.0f, eager);
      const double e = test::rel_l2(got, ref);
      std::printf("[mla-cuda] %s%s%s vs CPU reference: rel-L2 %.2e\n", std::string(dtype_name(dt)).c_str(),
                  tensor_cores ? " (tensor cores)" : "", eager ? ", eager step" : "", e);
      EXPECT_LT(e, dt == DType::F32 ? 1e-5 : 2e-2);
      const Batch last = step(sc, sc.n.size() - 1);
      const int H = shape.num_heads, v = shape.v_head_dim, real = last.qsl.back();
      for (int t = real; t < last.num_tokens; ++t)  // padded tokens: zero rows
        for (int i = 0; i < H * v; ++i) ASSERT_EQ(got[size_t(t * H * v + i)], 0.0f) << t;
    }
  }
}

// An e4m3 latent cache (--kv-cache-dtype fp8) at scale 0.5: the CUDA kernels in f32 and bf16 against
// the CPU reference over the same e4m3 cache (both quantize each latent value from f32, so only a
// value on a rounding boundary can land one e4m3 step apart), which stays within e4m3's rounding
// of the f32 cache's output and differs from it.
void expect_e4m3_matches_cpu(const Scenario& sc, const MlaShape& shape) {
  auto cpu = make_cpu_backend();
  auto ref_mla = make_mla_attention(*cpu, shape);
  const std::vector<float> ref = run(*cpu, *ref_mla, DType::F32, sc, shape, 0.5f);
  const double moved = test::rel_l2(ref, run(*cpu, *ref_mla, DType::F32, sc, shape));
  std::printf("[mla-cuda] e4m3 cache: the CPU reference against its f32 cache rel-L2 %.2e\n", moved);
  EXPECT_GT(moved, 1e-3);
  EXPECT_LT(moved, 0.1);
  for (DType dt : {DType::F32, DType::BF16}) {
    auto gpu = make_cuda_backend(0, dt);
    auto mla = make_cuda_mla_attention(*gpu, shape);
    for (const bool eager : {false, true}) {
      if (eager && dt != DType::BF16) break;
      const double e = test::rel_l2(run(*gpu, *mla, dt, sc, shape, 0.5f, eager), ref);
      std::printf("[mla-cuda] %s, e4m3 cache (%s)%s, vs CPU reference: rel-L2 %.2e\n",
                  std::string(dtype_name(dt)).c_str(), mla->name().c_str(), eager ? ", eager step" : "", e);
      EXPECT_LT(e, dt == DType::F32 ? 1e-2 : 3e-2);
    }
  }
}

TEST(CudaMla, E4m3CacheMatchesTheCpuReference) {
  GS_REQUIRE_GPU();
  expect_e4m3_matches_cpu(mixed(), test_shape());
  expect_e4m3_matches_cpu(long_context(), lite_shape());
}

// 19 tokens: each token's context splits over several CTAs (cuda::mla_splits, 12 here), merged
// before expand; in bf16 on tensor cores with heads that do not divide the attend's 64 rows (20
// heads, 3 tokens a tile) and padded latent columns (64 + 16).
TEST(CudaMla, MatchesTheCpuReferenceOnAMixedBatch) {
  GS_REQUIRE_GPU();
  expect_matches_cpu(mixed(), test_shape(), true);
}

// A 200-token prefill (one split a token), then a decode whose 201 rows split 32 ways.
TEST(CudaMla, MatchesTheCpuReferenceOverALongContext) {
  GS_REQUIRE_GPU();
  expect_matches_cpu(long_context(), test_shape(), true);
}

// The same at DeepSeek-V2-Lite's shape (every accumulator and weight segment of the kernels in use).
TEST(CudaMla, MatchesTheCpuReferenceAtDeepSeekV2LiteShape) {
  GS_REQUIRE_GPU();
  expect_matches_cpu(long_context(), lite_shape(), true);
}

// A 160-token step, whose absorption and W_UV run as batched GEMMs, at both shapes.
TEST(CudaMla, LongStepsMatchTheCpuReferenceOnTheGemms) {
  GS_REQUIRE_GPU();
  expect_matches_cpu(long_chunk(), test_shape(), true);
  expect_matches_cpu(long_chunk(), lite_shape(), true);
  expect_e4m3_matches_cpu(long_chunk(), lite_shape());
}

// An eager step of a decode and two long chunks at DeepSeek-V2-Lite's shape: the decode absorbed,
// the chunks in the expanded form (their contexts gathered from the paged cache, up-projected by
// one GEMM, then causal attention at head dims 192 / 128), over a bf16 and an e4m3 cache.
TEST(CudaMla, LongQueriesOfEagerStepsRunTheExpandedForm) {
  GS_REQUIRE_GPU();
  expect_matches_cpu(decode_then_chunks(), lite_shape(), true);
  expect_e4m3_matches_cpu(decode_then_chunks(), lite_shape());
}

// A latent the tensor-core attend is not built for (32 + 16): bf16 attends on CUDA cores too.
TEST(CudaMla, OtherLatentWidthsAttendOnCudaCores) {
  GS_REQUIRE_GPU();
  MlaShape s = test_shape();
  s.kv_lora_rank = 32;
  expect_matches_cpu(mixed(), s, false);
  expect_matches_cpu(long_context(), s, false);
  expect_e4m3_matches_cpu(mixed(), s);
}

class DeepSeekOnCuda : public ::testing::TestWithParam<std::string> {};

TEST_P(DeepSeekOnCuda, GreedyThroughTheRunner) {
  GS_REQUIRE_GPU();
  const test::FamilyFixture fx = test::load_family_fixture(GetParam());
  std::vector<test::SimRequest> reqs;
  for (size_t i = 0; i < fx.prompts.size(); ++i)
    reqs.push_back(test::greedy_request(fx.prompts[i], int(fx.tokens[i].size()), int(i)));
  for (const char* dtype : {"float32", "bfloat16"}) {
    RunnerConfig c;
    c.device = "cuda";
    c.dtype = dtype;
    c.model = test::family_dir(GetParam()).string();
    c.max_num_seqs = 4;
    c.max_num_batched_tokens = 32;
    c.kv_cache_memory_bytes = size_t(64) << 20;
    c.compilation.cudagraph_mode = CUDAGraphMode::FULL_AND_PIECEWISE;
    ModelRunner runner(c);
    const auto res = test::simulate(runner, reqs, 32);
    int prefix = 0, total = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      size_t p = 0;
      while (p < fx.tokens[i].size() && res.outputs[i][p] == fx.tokens[i][p]) ++p;
      prefix += int(p), total += int(fx.tokens[i].size());
    }
    std::printf(
        "[mla-cuda] %-18s %s FULL_AND_PIECEWISE greedy tokens equal to HF f32 before the first difference: "
        "%d/%d (FULL steps %zu, PIECEWISE %zu)\n",
        GetParam().c_str(), dtype, prefix, total, size_t(runner.stats().steps_full),
        size_t(runner.stats().steps_piecewise));
    if (std::string(dtype) == "float32") {
      EXPECT_EQ(res.outputs, fx.tokens);
    }
    EXPECT_GT(runner.stats().steps_full, 0u);
  }
}

// The logprob of each prompt token after those before it: the first `prompt.size() - tail`
// tokens in one step, then one token a step (the one-token decode graphs), through `runner`.
std::vector<float> teacher_forced_logprobs(ModelRunner& runner, const std::vector<int32_t>& prompt, int tail) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.prompt_logprobs = 0;
  std::vector<int32_t> tokens = prompt, blocks;
  for (int b = 0; b * runner.block_size() <= int(prompt.size()); ++b) blocks.push_back(b);
  std::vector<float> lp;
  for (int done = 0; done < int(prompt.size());) {
    const int n = done == 0 ? int(prompt.size()) - tail : 1;
    SchedulerOutput so;
    ScheduledRequest s;
    s.id = 1;
    s.all_token_ids = &tokens;
    s.num_prompt_tokens = int(prompt.size());
    s.num_computed_tokens = done;
    s.num_new_tokens = n;
    s.block_ids = &blocks;
    s.sample = done + n == int(prompt.size());
    s.params = &p;
    so.requests.push_back(s);
    for (const auto& x : runner.execute(so).prompt_logprobs) lp.push_back(x.logprob);
    done += n;
  }
  return lp;
}

// --quantization fp8 on DeepSeek: the routed experts in e4m3 (per output channel), run by
// moe_experts' FP8 form, the rest bf16, against the CPU reference of the same quantized experts in
// f32 (the deepseek_v2 fixture's config at hidden size and expert width 128, dummy weights): a
// prefill of 18 tokens and 6 one-token steps (FULL graphs) stay within bf16's distance from f32
// without the quantization, which must have moved the reference.
TEST(DeepSeekFp8, RoutedExpertsMatchTheCpuReference) {
  GS_REQUIRE_GPU();
  test::TempDir dir;
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(test::family_dir("deepseek_v2") / "config.json"));
  cfg["hidden_size"] = 128, cfg["moe_intermediate_size"] = 128;
  std::ofstream(dir.path() / "config.json") << cfg.dump();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 24; ++i) prompt.push_back((i * 37 + 11) % 500 + 3);
  const auto lp = [&](bool gpu, const char* quantization) {
    RunnerConfig c;
    c.model = dir.path().string();
    c.load_format = "dummy";
    c.quantization = quantization;
    c.device = gpu ? "cuda" : "cpu";
    c.dtype = gpu ? "bfloat16" : "float32";
    c.max_num_seqs = 4, c.max_num_batched_tokens = 32, c.kv_cache_memory_bytes = size_t(16) << 20;
    c.compilation.cudagraph_mode = gpu ? CUDAGraphMode::FULL_AND_PIECEWISE : CUDAGraphMode::NONE;
    ModelRunner runner(c);
    auto r = teacher_forced_logprobs(runner, prompt, 6);
    if (gpu) {
      EXPECT_GT(runner.stats().steps_full, 0u);
    }
    return r;
  };
  const auto got = lp(true, "fp8"), want = lp(false, "fp8"), bf16 = lp(true, ""), f32 = lp(false, "");
  ASSERT_EQ(got.size(), prompt.size() - 1);
  float worst = 0, yard = 0, moved = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]));
    yard = std::max(yard, std::abs(bf16[i] - f32[i]));
    moved = std::max(moved, std::abs(want[i] - f32[i]));
  }
  std::printf(
      "[deepseek-fp8] GPU FP8 experts vs the CPU reference: logprobs max |diff| %.4f | bf16 vs f32 %.4f | the "
      "quantization moved the reference by %.4f\n",
      worst, yard, moved);
  EXPECT_LT(worst, std::max(0.02f, 3 * yard));
  EXPECT_GT(moved, 1e-3f) << "the experts were not quantized";
}

// MLA's expanded form through the runner: the deepseek_v2 fixture's config at DeepSeek's head dims
// (nope 128, rope 64, v 128; kv_lora_rank 64), dummy weights, a 200-token prompt's first 194
// tokens in one step, then 6 one-token steps. With cudagraph mode NONE the long step is eager and runs
// the expanded form; with FULL it replays a captured graph and runs absorbed. Both stay within
// bf16's distance of the CPU reference (f32, the expanded form for the long step).
TEST(DeepSeekExpanded, EagerLongStepsMatchTheCpuReferenceThroughTheRunner) {
  GS_REQUIRE_GPU();
  test::TempDir dir;
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(test::family_dir("deepseek_v2") / "config.json"));
  cfg["qk_nope_head_dim"] = 128, cfg["qk_rope_head_dim"] = 64, cfg["v_head_dim"] = 128, cfg["kv_lora_rank"] = 64;
  std::ofstream(dir.path() / "config.json") << cfg.dump();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 200; ++i) prompt.push_back((i * 37 + 11) % 500 + 3);
  const auto lp = [&](bool gpu, CUDAGraphMode mode) {
    RunnerConfig c;
    c.model = dir.path().string();
    c.load_format = "dummy";
    c.device = gpu ? "cuda" : "cpu";
    c.dtype = gpu ? "bfloat16" : "float32";
    c.max_num_seqs = 4, c.max_num_batched_tokens = 256, c.kv_cache_memory_bytes = size_t(16) << 20;
    c.compilation.cudagraph_mode = mode;
    c.compilation.max_cudagraph_capture_size = 256;  // FULL: the long step replays a graph too
    ModelRunner runner(c);
    auto r = teacher_forced_logprobs(runner, prompt, 6);
    if (gpu) {
      EXPECT_EQ(mode == CUDAGraphMode::FULL ? runner.stats().steps_full : runner.stats().steps_none, 7u);
    }
    return r;
  };
  const auto expanded = lp(true, CUDAGraphMode::NONE), absorbed = lp(true, CUDAGraphMode::FULL);
  const auto want = lp(false, CUDAGraphMode::NONE);
  ASSERT_EQ(expanded.size(), prompt.size() - 1);
  float worst = 0, yard = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::abs(expanded[i] - want[i]));
    yard = std::max(yard, std::abs(absorbed[i] - want[i]));
  }
  std::printf(
      "[mla-cuda] runner, eager (expanded form) vs the CPU reference: logprobs max |diff| %.4f | FULL graphs "
      "(absorbed) %.4f\n",
      worst, yard);
  EXPECT_LT(worst, std::max(0.02f, 3 * yard));
}

INSTANTIATE_TEST_SUITE_P(HuggingFace, DeepSeekOnCuda, ::testing::ValuesIn(test::mla_family_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gs
