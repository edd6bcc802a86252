// Per-op GPU timings of `graphserve bench ops` (copy, linear, FP8, decode step, sampling):
// captured-graph replays timed with CUDA events, rotating weights so they never sit in L2.
#include "bench/cuda/op_timings.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "attention/cuda/cuda_attention.h"
#include "bench/cuda/bench_tensors.h"
#include "core/cuda/cuda_allocator.h"
#include "core/cuda/cuda_stream.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/lt_gemm.h"
#include "ops/kernel_options.h"
#include "ops/linear_op.h"
#include "sampling/cuda/cuda_sampling.h"
#include "sampling/sampler.h"

namespace gs::bench {
namespace {

// A bf16 (or dt) [N, K] weight of random values (one random chunk tiled: host RNG is slow at GB sizes).
Tensor weight(Backend& gpu, int64_t N, int64_t K, uint32_t seed, float sd = 0.02f, DType dt = DType::BF16) {
  const int64_t n = N * K, chunk = std::min<int64_t>(n, int64_t(1) << 22);
  Tensor src = on(gpu, randn(size_t(chunk), seed, sd), {chunk}, dt);
  Tensor w = Tensor::empty({N, K}, dt, gpu.allocator());
  Tensor flat = w.reshape({n});
  for (int64_t i = 0; i < n; i += chunk) {
    const int64_t c = std::min(chunk, n - i);
    gpu.copy(flat.rows(i, c), src.prefix({c}));
  }
  gpu.stream().synchronize();
  return w;
}

// Median-free but warm: ms per call of `body` over `iters` replays of a graph of `reps` calls.
template <typename F>
double time_graph_ms(Backend& b, int reps, F body, int iters = 20) {
  body();  // eager warm-up (plans, tables)
  b.stream().synchronize();
  b.stream().begin_capture();
  for (int i = 0; i < reps; ++i) body();
  auto g = b.stream().end_capture();
  g->replay();
  auto& cs = dynamic_cast<CudaStream&>(b.stream());
  CudaEventTimer t(cs.handle());
  t.start();
  for (int i = 0; i < iters; ++i) g->replay();
  t.stop();
  return double(t.elapsed_ms()) / (iters * reps);
}

}  // namespace

void time_copy_bandwidth() {
  auto gpu = make_cuda_backend();
  const int64_t n = int64_t(1) << 29;  // 1 GiB
  Tensor a = Tensor::empty({n}, DType::U8, gpu->allocator()), b = Tensor::empty({n}, DType::U8, gpu->allocator());
  gpu->fill_zero(a);
  const double ms = time_graph_ms(
      *gpu, 2, [&] { gpu->copy(b, a); }, 10);
  std::printf("[bench] d2d copy 1 GiB: %.3f ms, %.2f TB/s (read+write)\n", ms, 2.0 * double(n) / ms / 1e9);
}

void time_linear() {
  auto gpu = make_cuda_backend();
  LtGemm lt(gpu->allocator());
  cudaStream_t s = dynamic_cast<CudaStream&>(gpu->stream()).handle();
  struct Shape2 {
    int N, K;
    bool f32;
  };
  // backend: Backend::linear's own path (GEMV at M = 1, the skinny GEMM up to kSkinnyTokens).
  std::printf("[bench] %-16s %4s %10s %9s %10s %9s\n", "linear NxK", "M", "backend us", "TB/s", "cublasLt us", "TB/s");
  for (const Shape2 sh :
       {Shape2{2048, 2048, false}, Shape2{3072, 2048, false}, Shape2{8192, 2048, false}, Shape2{2048, 8192, false},
        Shape2{16384, 2048, false}, Shape2{128256, 2048, true}, Shape2{6144, 4096, false}, Shape2{4096, 4096, false},
        Shape2{28672, 4096, false}, Shape2{4096, 14336, false}}) {
    const double wbytes = 2.0 * sh.N * sh.K;
    const int copies = std::max(1, int(768e6 / wbytes));
    std::vector<Tensor> ws;
    for (int i = 0; i < copies; ++i) ws.push_back(weight(*gpu, sh.N, sh.K, uint32_t(i)));
    for (int M : {1, 2, 8, 16, 32, 64, 128}) {
      Tensor x = on(*gpu, randn(size_t(M) * sh.K, 99), {M, sh.K}, DType::BF16);
      Tensor y = Tensor::empty({M, sh.N}, sh.f32 ? DType::F32 : DType::BF16, gpu->allocator());
      int i = 0;
      const double backend_ms =
          time_graph_ms(*gpu, copies, [&] { gpu->linear(x, ws[size_t(i++ % copies)], Tensor(), y); });
      i = 0;
      const double lt_ms = time_graph_ms(*gpu, copies, [&] {
        lt.matmul(x.data(), ws[size_t(i++ % copies)].data(), y.data(), false, sh.f32, M, sh.N, sh.K, s);
      });
      std::printf("[bench] %6dx%-9d %4d %10.2f %9.2f %10.2f %9.2f\n", sh.N, sh.K, M, backend_ms * 1e3,
                  wbytes / backend_ms / 1e9, lt_ms * 1e3, wbytes / lt_ms / 1e9);
    }
  }
}

void time_fp8_linear() {
  KernelOptions skinny_all, no_skinny;
  skinny_all.fp8.skinny_max_tokens = 128;
  no_skinny.fp8.skinny_max_tokens = 0;
  auto gpu = make_cuda_backend(), all = make_cuda_backend(0, DType::BF16, skinny_all),
       old = make_cuda_backend(0, DType::BF16, no_skinny);
  std::printf("[bench] fp8 linear: us per call (TB/s of weight bytes); %s\n", gpu->fp8_kernels().c_str());
  std::printf("[bench] %-12s %4s %16s %16s %16s %16s\n", "NxK", "M", "bf16", "fp8 default", "skinny to 128",
              "fp8 gemv/Lt");
  for (const auto& [N, K] : {std::pair<int, int>{3072, 2048},
                             {2048, 2048},
                             {16384, 2048},
                             {2048, 8192},
                             {6144, 4096},
                             {4096, 4096},
                             {28672, 4096},
                             {4096, 14336}}) {
    // Copies of one random weight (rotated so that none sits in L2).
    const int copies = std::max(1, int(768e6 / (2.0 * N * K)));
    const Tensor w0 = weight(*gpu, N, K, 1), src = weight(*gpu, N, K, 1, 0.02f, DType::F32);
    std::vector<Tensor> wb, wq;
    for (int i = 0; i < copies; ++i) {
      wb.push_back(Tensor::empty({N, K}, DType::BF16, gpu->allocator()));
      gpu->copy(wb.back(), w0);
      wq.push_back(Tensor::empty({N, K}, DType::F8E4M3, gpu->allocator())
                       .with_scales(Tensor::empty({N, 1}, DType::F32, gpu->allocator())));
      gpu->stream().synchronize();
      for (Backend* be : {gpu.get(), all.get(), old.get()})  // each sizes its own scratch
        be->quantize_fp8(src, 1, false, wq.back());
    }
    for (int M : {1, 2, 4, 8, 16, 32, 64, 128}) {
      Tensor x = on(*gpu, randn(size_t(M) * K, 99), {M, K}, DType::BF16);
      Tensor y = Tensor::empty({M, N}, DType::BF16, gpu->allocator());
      const auto time = [&](Backend& be, const std::vector<Tensor>& ws) {
        int i = 0;
        return time_graph_ms(be, copies, [&] { be.linear(x, ws[size_t(i++ % copies)], Tensor(), y); }) * 1e3;
      };
      const double b = time(*gpu, wb), d = time(*gpu, wq), s = time(*all, wq), o = time(*old, wq);
      const auto bw = [&](double us, double bytes) { return bytes * N * K / us / 1e6; };
      std::printf("[bench] %5dx%-6d %4d %8.2f (%4.2f) %8.2f (%4.2f) %8.2f (%4.2f) %8.2f (%4.2f)\n", N, K, M, b,
                  bw(b, 2), d, bw(d, 1), s, bw(s, 1), o, bw(o, 1));
    }
  }
}

void time_fp8_epilogues() {
  KernelOptions pass_opts;
  pass_opts.fp8.lt_fused_epilogues = false;
  auto gpu = make_cuda_backend(), pass = make_cuda_backend(0, DType::BF16, pass_opts);
  const int hq = 32, hkv = 8, D = 128, H = 4096, I = 14336;  // llama3.1-8b
  RopeConfig rope;
  rope.theta = 500000.0f;
  rope.head_dim = D;
  std::printf(
      "[bench] fp8 projection + epilogue above the skinny kernel, llama3.1-8b shapes: us per call; scales in "
      "the epilogue's op (default) vs the scale pass + op, bf16, and 128x128 block-scaled weights\n");
  std::printf("[bench] %-8s %5s %10s %10s %7s %10s %10s\n", "op", "M", "fused us", "pass us", "ratio", "bf16 us",
              "blocks us");
  struct Proj {
    const char* name;
    int N, K;
  };
  for (const Proj pj :
       {Proj{"qkv", (hq + 2 * hkv) * D, H}, Proj{"gate_up", 2 * I, H}, Proj{"o_proj", H, H}, Proj{"down", H, I}}) {
    const Tensor wb = weight(*gpu, pj.N, pj.K, 3), src = weight(*gpu, pj.N, pj.K, 3, 0.02f, DType::F32);
    const Tensor wq = Tensor::empty({pj.N, pj.K}, DType::F8E4M3, gpu->allocator())
                          .with_scales(Tensor::empty({pj.N, 1}, DType::F32, gpu->allocator()));
    const Tensor wblk = Tensor::empty({pj.N, pj.K}, DType::F8E4M3, gpu->allocator())
                            .with_scales(Tensor::empty({pj.N, pj.K / 128}, DType::F32, gpu->allocator()));
    for (Backend* be : {gpu.get(), pass.get()}) be->quantize_fp8(src, 1, false, wq);  // each sizes its scratch
    gpu->quantize_fp8(src, 128, true, wblk);  // 128x128 blocks, as Qwen3's FP8 checkpoints
    for (int M : {256, 2048, 8192}) {
      const Tensor x = weight(*gpu, M, pj.K, 4, 1.0f), y = Tensor::empty({M, pj.N}, DType::BF16, gpu->allocator());
      const Tensor out = Tensor::empty({M, std::max(pj.N / 2, H)}, DType::BF16, gpu->allocator());
      const Tensor res = weight(*gpu, M, H, 5, 1.0f, DType::F32), norm = weight(*gpu, 1, H, 6, 1.0f).reshape({H});
      const Tensor q = Tensor::empty({M, hq * D}, DType::BF16, gpu->allocator());
      const Tensor k = Tensor::empty({M, hkv * D}, DType::BF16, gpu->allocator());
      const Tensor v = Tensor::empty({M, hkv * D}, DType::BF16, gpu->allocator());
      std::vector<int32_t> p(static_cast<size_t>(M));
      for (int i = 0; i < M; ++i) p[size_t(i)] = i;
      const Tensor pos = on_i32(*gpu, p, {M});
      LinearEpilogue then;
      if (pj.N == (hq + 2 * hkv) * D) then = SplitQkvRope{pos, &rope, Tensor(), Tensor(), 1e-5f, q, k, v};
      if (pj.N == 2 * I) then = Gated{GatedActivation::Silu, out.prefix({M, I})};
      if (pj.N == H) then = AddRmsNorm{res, norm, 1e-5f, out.prefix({M, H})};
      const auto time = [&](Backend& be, const Tensor& w) {
        return time_graph_ms(
                   be, 1, [&] { be.linear({.x = x, .w = w, .y = y, .then = then}); }, 10) *
               1e3;
      };
      const double f = time(*gpu, wq), o = time(*pass, wq), b = time(*gpu, wb), bk = time(*gpu, wblk);
      std::printf("[bench] %-8s %5d %10.1f %10.1f %7.3f %10.1f %10.1f\n", pj.name, M, f, o, f / o, b, bk);
    }
  }
}

void time_decode_step() {
  auto gpu = make_cuda_backend();
  const int L = 16, H = 2048, I = 8192, hq = 32, hkv = 8, D = 64, V = 128256, ctx = 256, bsz = 16;
  struct Layer {
    Tensor n1, qkv, o, n2, gu, down;
  };
  std::vector<Layer> layers;
  for (int l = 0; l < L; ++l) {
    auto w = [&](int n, int k, float sd) { return weight(*gpu, n, k, uint32_t(1000 + l * 8 + n % 7), sd); };
    layers.push_back({w(1, H, 1.0f).reshape({H}), w((hq + 2 * hkv) * D, H, 0.02f), w(H, hq * D, 0.02f),
                      w(1, H, 1.0f).reshape({H}), w(2 * I, H, 0.02f), w(H, I, 0.02f)});
  }
  Tensor final_norm = on(*gpu, randn(H, 5), {H}, DType::BF16);
  Tensor lm_head = weight(*gpu, V, H, 6);
  auto attn = make_cuda_attention(*gpu, {hq, hkv, D, 0.125f});
  RopeConfig rope{.theta = 500000.0f,
                  .head_dim = D,
                  .llama3_factor = 32.0f,
                  .llama3_low_freq_factor = 1.0f,
                  .llama3_high_freq_factor = 4.0f,
                  .llama3_original_max_position = 8192,
                  .short_factor = {},
                  .long_factor = {}};
  std::printf("[bench] llama-3.2-1b shape decode step (ctx %d), one graph:\n", ctx);
  for (int B : {1, 8, 32, 128}) {
    const int blocks_per_req = ctx / bsz + 1, nblocks = B * blocks_per_req;
    std::vector<KVCacheLayer> kv(L);
    for (auto& c : kv) {
      c.k = Tensor::empty({nblocks, bsz, hkv, D}, DType::BF16, gpu->allocator());
      c.v = Tensor::empty({nblocks, bsz, hkv, D}, DType::BF16, gpu->allocator());
      gpu->fill_zero(c.k);
      gpu->fill_zero(c.v);
    }
    std::vector<int32_t> qsl(B + 1), lens(B, ctx), bt(size_t(B) * blocks_per_req), slots(B), pos(B, ctx - 1), ids(B, 7);
    for (int r = 0; r <= B; ++r) qsl[size_t(r)] = r;
    for (size_t i = 0; i < bt.size(); ++i) bt[i] = int32_t(i);
    for (int r = 0; r < B; ++r) slots[size_t(r)] = (r * blocks_per_req + (ctx - 1) / bsz) * bsz + (ctx - 1) % bsz;
    AttentionMetadata md;
    md.query_start_loc = on_i32(*gpu, qsl, {B + 1});
    md.seq_lens = on_i32(*gpu, lens, {B});
    md.block_table = on_i32(*gpu, bt, {B, blocks_per_req});
    md.slot_mapping = on_i32(*gpu, slots, {B});
    md.num_reqs = md.num_reqs_padded = B;
    md.max_query_len = 1;
    md.block_size = bsz;
    md.max_blocks_per_req = blocks_per_req;
    Tensor tok = on_i32(*gpu, ids, {B}), positions = on_i32(*gpu, pos, {B});
    auto act = [&](int n) { return Tensor::empty({B, n}, DType::BF16, gpu->allocator()); };
    Tensor res = act(H), h = act(H), qkv = act((hq + 2 * hkv) * D), att = act(hq * D), gu = act(2 * I), a = act(I);
    Tensor logits = Tensor::empty({B, V}, DType::F32, gpu->allocator());
    gpu->fill_zero(res);
    auto step = [&] {
      gpu->embedding(tok, lm_head, h);
      for (auto& ly : layers) {
        gpu->add_rms_norm(res, h, ly.n1, 1e-5f, h);
        gpu->linear(h, ly.qkv, Tensor(), qkv);
        gpu->linear(att, ly.o, Tensor(), h);
        gpu->add_rms_norm(res, h, ly.n2, 1e-5f, h);
        gpu->linear(h, ly.gu, Tensor(), gu);
        gpu->gated_activation(GatedActivation::Silu, gu, a);
        gpu->linear(a, ly.down, Tensor(), h);
      }
      gpu->add_rms_norm(res, h, final_norm, 1e-5f, h);
      gpu->linear(h, lm_head, Tensor(), logits);
    };
    // the fused QKV epilogue (split + rope) and attention
    Tensor q = act(hq * D), k = act(hkv * D), v = act(hkv * D);
    gpu->fill_zero(q), gpu->fill_zero(k), gpu->fill_zero(v);
    auto attention = [&] {
      for (int l = 0; l < L; ++l) {
        gpu->split_qkv_rope(qkv, positions, rope, Tensor(), Tensor(), 1e-6f, q, k, v);
        attn->forward(q, k, v, kv[size_t(l)], md, att);
      }
    };
    const double step_ms = time_graph_ms(*gpu, 1, step, 50);
    const double attn_ms = time_graph_ms(*gpu, 1, attention, 50);
    std::printf("[bench]   bs %4d: linears+norms %.3f ms + rope+attention %.3f ms = %.3f ms per step\n", B, step_ms,
                attn_ms, step_ms + attn_ms);
  }
}

void time_sampling() {
  auto gpu = make_cuda_backend();
  constexpr int V = 128256, kMaxRows = 128;
  Sampler sampler(*gpu, make_cuda_sampling_kernels(*gpu), SamplerLimits{kMaxRows, V, 1, 16});
  Tensor x = Tensor::empty({kMaxRows, V}, DType::F32, gpu->allocator());
  struct Kind {
    const char* name;
    float temperature, top_p;
    int top_k;
  };
  const Kind kinds[] = {{"greedy", 0.0f, 1.0f, 0},
                        {"T 1", 1.0f, 1.0f, 0},
                        {"T 0.7 p 0.9", 0.7f, 0.9f, 0},
                        {"T 1 k 50 p 0.95", 1.0f, 0.95f, 50}};
  std::printf("[sampling] %-7s %4s", "logits", "rows");
  for (const Kind& k : kinds) std::printf(" %16s", k.name);
  std::printf("   (us a step)\n");
  // flat: a dummy-weight model's rows (every logit within a few of the others); peaked: a
  // trained model's (32 tokens about 20 logits above a bulk of spread 2.5).
  for (const bool peaked : {false, true}) {
    std::mt19937 rng(7);
    std::normal_distribution<float> bulk(0.0f, peaked ? 2.5f : 1.0f);
    std::uniform_int_distribution<int> token(0, V - 1);
    std::vector<float> host(size_t(kMaxRows) * V);
    for (float& v : host) v = bulk(rng);
    if (peaked)
      for (int i = 0; i < kMaxRows; ++i)
        for (int j = 0; j < 32; ++j) host[size_t(i) * V + size_t(token(rng))] += 20.0f;
    gpu->copy(x, Tensor::wrap(host.data(), {kMaxRows, V}, DType::F32, Device::cpu()));
    for (const int n : {1, 32, 128}) {
      std::printf("[sampling] %-7s %4d", peaked ? "peaked" : "flat", n);
      for (const Kind& k : kinds) {
        std::vector<SamplingRow> rows(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i) {
          rows[size_t(i)].temperature = k.temperature, rows[size_t(i)].top_p = k.top_p;
          rows[size_t(i)].top_k = k.top_k, rows[size_t(i)].seed_lo = uint32_t(i) + 1;
        }
        sampler.stage(rows, {}, {});
        std::printf(" %16.1f", time_graph_ms(*gpu, 10, [&] { sampler.sample(x, n); }) * 1e3);
      }
      std::printf("\n");
    }
  }
}

}  // namespace gs::bench
