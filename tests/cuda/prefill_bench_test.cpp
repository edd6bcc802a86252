// Prefill timings (not a test of speed: it only runs with GS_CUDA_BENCH=1 and prints lines
// starting "[prefill]"): one attention layer of the llama3.2-1b shape (32 q heads, 8 kv heads,
// D 64) on the tensor-core kernel (at D 64: wgmma, and mma.sync as GS_PREFILL_WGMMA=0 selects) and
// on the flash-decoding kernel, and the layer's cuBLASLt
// GEMMs at large M, each as ms and TFLOP/s (median of eager launches timed with CUDA events).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <vector>

#include "attention/cuda/attention_kernels.h"
#include "attention/cuda/prefill_attention.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "cuda_test_util.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/lt_gemm.h"

namespace gs {
namespace {

bool enabled() { return std::getenv("GS_CUDA_BENCH") != nullptr; }

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
  Tensor src = test::on(gpu, test::randn(size_t(chunk), seed), {chunk}, DType::BF16);
  Tensor t = Tensor::empty({n}, DType::BF16, gpu.allocator());
  for (int64_t i = 0; i < n; i += chunk) {
    const int64_t c = std::min(chunk, n - i);
    gpu.copy(t.rows(i, c), src.prefix({c}));
  }
  return t;
}

TEST(PrefillBench, AttentionLayer) {
  GS_REQUIRE_GPU();
  if (!enabled()) GTEST_SKIP() << "set GS_CUDA_BENCH=1";
  auto gpu = make_cuda_backend(0, DType::BF16);
  const cudaStream_t s = dynamic_cast<CudaStream&>(gpu->stream()).handle();
  for (int D : {64, 128}) {
    for (int T : {2048, 8192}) {
      const int hq = 32, hkv = 8, bs = 16, blocks = T / bs;
      Tensor q = random_bf16(*gpu, int64_t(T) * hq * D, 1), k = random_bf16(*gpu, int64_t(T) * hkv * D, 2);
      Tensor v = random_bf16(*gpu, int64_t(T) * hkv * D, 3), out = random_bf16(*gpu, int64_t(T) * hq * D, 4);
      Tensor kc = random_bf16(*gpu, int64_t(T) * hkv * D, 5), vc = random_bf16(*gpu, int64_t(T) * hkv * D, 6);
      std::vector<int32_t> qsl{0, T}, seq{T}, bt(static_cast<size_t>(blocks)), slots(static_cast<size_t>(T));
      for (int i = 0; i < blocks; ++i) bt[size_t(i)] = (i * 7) % blocks;  // blocks % 7 != 0
      for (int t = 0; t < T; ++t) slots[size_t(t)] = bt[size_t(t / bs)] * bs + t % bs;
      Tensor dq = test::on_i32(*gpu, qsl, {2}), ds = test::on_i32(*gpu, seq, {1});
      Tensor db = test::on_i32(*gpu, bt, {1, blocks}), dm = test::on_i32(*gpu, slots, {T});
      cuda::PagedAttentionParams p;
      p.q = q.data(), p.k = k.data(), p.v = v.data(), p.out = out.data(), p.k_cache = kc.data(), p.v_cache = vc.data();
      p.slot_mapping = dm.data_as<int32_t>(), p.num_slots = T, p.query_start_loc = dq.data_as<int32_t>();
      p.seq_lens = ds.data_as<int32_t>(), p.block_table = db.data_as<int32_t>(), p.num_reqs_padded = 1;
      p.max_blocks_per_req = blocks, p.block_size = bs, p.num_blocks = blocks, p.hq = hq, p.hkv = hkv, p.D = D;
      p.scale = 0.125f;
      const double flop = 2.0 * double(T) * T * D * hq;  // causal: half of 4 T^2 D per head
      const double tc = median_ms(
          s, [&] { GS_CUDA_CHECK(cuda::prefill_attention(p, -1, T, false, s)); }, 20);
      double tc2 = 0.0;
      if (D == 64) {
        setenv("GS_PREFILL_WGMMA", "0", 1);
        tc2 = median_ms(
            s, [&] { GS_CUDA_CHECK(cuda::prefill_attention(p, -1, T, false, s)); }, 20);
        unsetenv("GS_PREFILL_WGMMA");
      }
      const bool run_old = D == 64 && T <= 2048;  // the decode-style kernel takes ~60 ms at 8k
      const double old = run_old ? median_ms(
                                       s, [&] { GS_CUDA_CHECK(cuda::paged_attention(p, T, s)); }, 3)
                                 : 0.0;
      printf(
          "[prefill] attention D %d T %d: tensor-core %.3f ms (%.0f TFLOP/s), mma.sync %.3f ms (%.0f), "
          "decode kernel %.3f ms\n",
          D, T, tc, flop / tc * 1e-9, tc2, tc2 > 0 ? flop / tc2 * 1e-9 : 0.0, old);
    }
  }
}

TEST(PrefillBench, GemmsAtLargeM) {
  GS_REQUIRE_GPU();
  if (!enabled()) GTEST_SKIP() << "set GS_CUDA_BENCH=1";
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

}  // namespace
}  // namespace gs
