// Prefill timings of `graphserve bench ops` (lines starting "[prefill]"): one attention layer of the llama3.2-1b shape
// (32 q heads, 8 kv heads, D 64) on the tensor-core kernel (at D 64: wgmma, and mma.sync with
// AttentionKernelOptions::prefill_wgmma off) and on the
// flash-decoding kernel, the same layer of an 8k prompt in prefill chunks, and the layer's cuBLASLt
// GEMMs at large M, each as ms and TFLOP/s (median of eager launches timed with CUDA events); the
// attention also on an e4m3 cache (--kv-cache-dtype fp8).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench/cuda/op_timings.h"

#include "attention/cuda/flash_decoding_attention.h"
#include "attention/cuda/prefill_attention.h"
#include "bench/cuda/bench_tensors.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/lt_gemm.h"

namespace gs::bench {
namespace {

double median_ms(cudaStream_t s, const std::function<void()>& body, int iters) {
  body();
  GS_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    CudaEventTimer t(s);
    t.start();
    body();
    t.stop();
    ms.push_back(t.elapsed_ms());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Random bf16 device tensor (one random chunk tiled).
Tensor random_bf16(Backend& gpu, int64_t n, uint32_t seed) {
  const int64_t chunk = std::min<int64_t>(n, int64_t(1) << 20);
  Tensor src = on(gpu, randn(size_t(chunk), seed), {chunk}, DType::BF16);
  Tensor t = Tensor::empty({n}, DType::BF16, gpu.allocator());
  for (int64_t i = 0; i < n; i += chunk) {
    const int64_t c = std::min(chunk, n - i);
    gpu.copy(t.rows(i, c), src.prefix({c}));
  }
  return t;
}

// One attention layer of the llama3.2-1b shape (32 q heads, 8 kv heads) over a context of `ctx`
// tokens in 16-token blocks placed out of order: q, k, v, out hold up to ctx new tokens, the
// caches (bf16, and e4m3 as --kv-cache-dtype fp8 keeps it) every position.
struct Layer {
  static constexpr int hq = 32, hkv = 8, bs = 16;
  int D, ctx;
  Tensor q, k, v, out, kc, vc, kc8, vc8, block_table, slots;
  Layer(Backend& gpu, int D_, int ctx_) : D(D_), ctx(ctx_) {
    const int blocks = ctx / bs;
    q = random_bf16(gpu, int64_t(ctx) * hq * D, 1), k = random_bf16(gpu, int64_t(ctx) * hkv * D, 2);
    v = random_bf16(gpu, int64_t(ctx) * hkv * D, 3), out = random_bf16(gpu, int64_t(ctx) * hq * D, 4);
    kc = random_bf16(gpu, int64_t(ctx) * hkv * D, 5), vc = random_bf16(gpu, int64_t(ctx) * hkv * D, 6);
    kc8 = random_cache_plane(gpu, {blocks, bs, hkv, D}, 7, true),
    vc8 = random_cache_plane(gpu, {blocks, bs, hkv, D}, 8, true);
    std::vector<int32_t> bt(static_cast<size_t>(blocks)), sl(static_cast<size_t>(ctx));
    for (int i = 0; i < blocks; ++i) bt[size_t(i)] = (i * 7) % blocks;  // blocks % 7 != 0
    for (int t = 0; t < ctx; ++t) sl[size_t(t)] = bt[size_t(t / bs)] * bs + t % bs;
    block_table = on_i32(gpu, bt, {1, blocks}), slots = on_i32(gpu, sl, {ctx});
  }
  // Parameters for new tokens [start, start + n) of one request (qsl = {0, n} and seq_lens =
  // {start + n}: device tensors the caller keeps alive), on the bf16 or (fp8) the e4m3 cache.
  cuda::PagedAttentionParams params(int start, const Tensor& qsl, const Tensor& seq, bool fp8 = false) const {
    cuda::PagedAttentionParams p;
    p.q = q.data(), p.k = k.data(), p.v = v.data(), p.out = out.data();
    p.k_cache = (fp8 ? kc8 : kc).data(), p.v_cache = (fp8 ? vc8 : vc).data(), p.fp8_cache = fp8;
    p.slot_mapping = slots.data_as<int32_t>() + start, p.num_slots = ctx, p.query_start_loc = qsl.data_as<int32_t>();
    p.seq_lens = seq.data_as<int32_t>(), p.block_table = block_table.data_as<int32_t>(), p.num_reqs_padded = 1;
    p.max_blocks_per_req = ctx / bs, p.block_size = bs, p.num_blocks = ctx / bs, p.hq = hq, p.hkv = hkv, p.D = D;
    p.scale = 0.125f;
    return p;
  }
  // Median ms of one prefill_attention launch for those tokens under options o (fp8: on the e4m3
  // cache, whose rows for the new tokens the kernel reads as already written).
  double time(cudaStream_t s, int start, int n, const Tensor& qsl, const Tensor& seq,
              const AttentionKernelOptions& o = {}, bool fp8 = false) const {
    const cuda::PagedAttentionParams p = params(start, qsl, seq, fp8);
    return median_ms(
        s, [&] { GS_CUDA_CHECK(cuda::prefill_attention(p, o, -1, n, s)); }, 20);
  }
  // Causal attention FLOPs of new tokens [start, start + n).
  double flop(int start, int n) const { return 4.0 * D * hq * (double(start) * n + 0.5 * double(n) * n); }
};

}  // namespace

void time_prefill_attention() {
  auto gpu = make_cuda_backend(0, DType::BF16);
  const cudaStream_t s = dynamic_cast<CudaStream&>(gpu->stream()).handle();
  for (int D : {64, 128}) {
    for (int T : {2048, 8192}) {
      const Layer L(*gpu, D, T);
      const Tensor qsl = on_i32(*gpu, {0, T}, {2}), seq = on_i32(*gpu, {T}, {1});
      const double flop = L.flop(0, T), tc = L.time(s, 0, T, qsl, seq);
      double tc2 = 0.0;
      if (D == 64) {
        AttentionKernelOptions mma_sync;
        mma_sync.prefill_wgmma = false;
        tc2 = L.time(s, 0, T, qsl, seq, mma_sync);
      }
      const double f8 = L.time(s, 0, T, qsl, seq, {}, true);
      double old = 0.0;
      if (D == 64 && T <= 2048) {  // the decode-style kernel takes ~60 ms at 8k
        const cuda::PagedAttentionParams p = L.params(0, qsl, seq);
        old = median_ms(
            s, [&] { GS_CUDA_CHECK(cuda::flash_decoding_attention(p, T, s)); }, 3);
      }
      printf(
          "[prefill] attention D %d T %d: tensor-core %.3f ms (%.0f TFLOP/s), mma.sync %.3f ms (%.0f), e4m3 cache "
          "%.3f ms (%.0f), decode kernel %.3f ms\n",
          D, T, tc, flop / tc * 1e-9, tc2, tc2 > 0 ? flop / tc2 * 1e-9 : 0.0, f8, flop / f8 * 1e-9, old);
    }
  }
}

// Chunked prefill's attention: an 8k prompt's layer (D 64 and 128) in chunks of 1,024 / 2,048 / 4,096 new
// tokens (each over the earlier chunks in the paged cache) against one pass of 8,192.
void time_chunked_prefill_attention() {
  auto gpu = make_cuda_backend(0, DType::BF16);
  const cudaStream_t s = dynamic_cast<CudaStream&>(gpu->stream()).handle();
  constexpr int kCtx = 8192;
  for (int D : {64, 128}) {
    const Layer L(*gpu, D, kCtx);
    for (int chunk : {1024, 2048, 4096, 8192})
      for (const bool fp8 : {false, true}) {
        const Tensor qsl = on_i32(*gpu, {0, chunk}, {2});
        double total = 0.0;
        std::string per;
        for (int start = 0; start < kCtx; start += chunk) {
          const Tensor seq = on_i32(*gpu, {start + chunk}, {1});
          const double ms = L.time(s, start, chunk, qsl, seq, {}, fp8);
          total += ms;
          char buf[48];
          snprintf(buf, sizeof buf, " %.3f (%.0f)", ms, L.flop(start, chunk) / ms * 1e-9);
          per += buf;
        }
        printf(
            "[prefill] chunked attention D %d, %s cache, 8192 tokens in chunks of %d: %.3f ms (%.0f TFLOP/s); per "
            "chunk ms (TFLOP/s):%s\n",
            D, fp8 ? "e4m3" : "bf16", chunk, total, L.flop(0, kCtx) / total * 1e-9, per.c_str());
      }
  }
}

void time_prefill_gemms() {
  auto gpu = make_cuda_backend(0, DType::BF16);
  const cudaStream_t s = dynamic_cast<CudaStream&>(gpu->stream()).handle();
  LtGemm lt(gpu->allocator());
  struct Shape {
    const char* name;
    int N, K;
  };
  for (int M : {2048, 8192}) {
    for (const Shape& sh :
         {Shape{"qkv", 3072, 2048}, Shape{"o", 2048, 2048}, Shape{"gate_up", 16384, 2048}, Shape{"down", 2048, 8192}}) {
      Tensor x = random_bf16(*gpu, int64_t(M) * sh.K, 1), w = random_bf16(*gpu, int64_t(sh.N) * sh.K, 2);
      Tensor y = Tensor::empty({int64_t(M) * sh.N}, DType::BF16, gpu->allocator());
      auto gemm = [&] { lt.matmul(x.data(), w.data(), y.data(), false, false, M, sh.N, sh.K, s); };
      const double ms = median_ms(s, gemm, 20);
      printf("[prefill] gemm %-7s M %d N %d K %d: %.3f ms (%.0f TFLOP/s)\n", sh.name, M, sh.N, sh.K, ms,
             2.0 * M * sh.N * sh.K / ms * 1e-9);
    }
  }
}

}  // namespace gs::bench
