// Cascade attention timings of `graphserve bench ops` (lines starting "[cascade]"): one attention
// layer of the Llama-3.1-8B shape (32 q heads, 8 kv heads, D 128) for a decode batch whose requests
// share a prefix of the cache, through the CUDA attention backend with and without the prefix as
// a cascade (median of eager launches timed with CUDA events).
#include <algorithm>
#include <cstdio>
#include <vector>

#include "attention/cuda/cuda_attention.h"
#include "bench/cuda/bench_tensors.h"
#include "bench/cuda/op_timings.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "ops/cuda/cuda_backend.h"

namespace gs::bench {

namespace {

constexpr int kHq = 32, kHkv = 8, kD = 128, kBlock = 16;

// Median ms of `iters` launches of attention on one decode batch (cascade_prefix = 0: plain).
double time_layer(Backend& gpu, AttentionBackend& attn, int reqs, int prefix, int own, int cascade_prefix) {
  const int shared = prefix / kBlock, per_req = (own + kBlock - 1) / kBlock, width = shared + per_req;
  const int blocks = shared + reqs * per_req;
  const size_t n = size_t(reqs);
  std::vector<int32_t> bt(n * size_t(width)), qsl(n + 1), seq(n), slots(n);
  for (int r = 0; r < reqs; ++r) {
    for (int j = 0; j < width; ++j) bt[size_t(r) * width + j] = j < shared ? j : shared + r * per_req + (j - shared);
    qsl[size_t(r) + 1] = r + 1;
    seq[size_t(r)] = prefix + own;
    const int p = prefix + own - 1;
    slots[size_t(r)] = bt[size_t(r) * width + p / kBlock] * kBlock + p % kBlock;
  }
  const Shape cache_shape{blocks, kBlock, kHkv, kD};
  const size_t cache_elems = size_t(blocks) * kBlock * kHkv * kD;
  KVCacheLayer cache{on(gpu, randn(cache_elems, 1), cache_shape, DType::BF16),
                     on(gpu, randn(cache_elems, 2), cache_shape, DType::BF16)};
  AttentionMetadata md;
  md.query_start_loc = on_i32(gpu, qsl, {reqs + 1});
  md.seq_lens = on_i32(gpu, seq, {reqs});
  md.block_table = on_i32(gpu, bt, {reqs, width});
  md.slot_mapping = on_i32(gpu, slots, {reqs});
  md.num_reqs = reqs, md.block_size = kBlock, md.max_blocks_per_req = width;
  attn.plan_eager(md, 1);
  md.cascade_prefix_len = cascade_prefix;
  const Tensor q = on(gpu, randn(size_t(reqs) * kHq * kD, 3), {reqs, kHq * kD}, DType::BF16);
  const Tensor k = on(gpu, randn(size_t(reqs) * kHkv * kD, 4), {reqs, kHkv * kD}, DType::BF16);
  const Tensor v = on(gpu, randn(size_t(reqs) * kHkv * kD, 5), {reqs, kHkv * kD}, DType::BF16);
  const Tensor out = Tensor::empty({reqs, kHq * kD}, DType::BF16, gpu.allocator());
  const cudaStream_t s = dynamic_cast<CudaStream&>(gpu.stream()).handle();
  attn.forward(q, k, v, cache, md, out);
  GS_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> ms;
  for (int i = 0; i < 20; ++i) {
    CudaEventTimer t(s);
    t.start();
    attn.forward(q, k, v, cache, md, out);
    t.stop();
    ms.push_back(t.elapsed_ms());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

void time_cascade_attention() {
  auto gpu = make_cuda_backend(0, DType::BF16);
  auto attn = make_cuda_attention(*gpu, AttentionShape{kHq, kHkv, kD, 0.0f});
  struct Batch {
    int reqs, prefix, own;
  };
  for (const Batch b : {Batch{64, 4096, 256}, Batch{16, 4096, 256}, Batch{128, 2048, 128}, Batch{256, 1024, 64}}) {
    const double plain = time_layer(*gpu, *attn, b.reqs, b.prefix, b.own, 0);
    const double cascade = time_layer(*gpu, *attn, b.reqs, b.prefix, b.own, b.prefix);
    printf(
        "[cascade] decode attention D %d, %d requests, %d shared + %d own tokens: plain %.3f ms, cascade %.3f ms "
        "(%.2fx)\n",
        kD, b.reqs, b.prefix, b.own, plain, cascade, plain / cascade);
  }
}

}  // namespace gs::bench
