// Decode attention timings of `graphserve bench ops`: one attention layer of the Llama-3.1-8B shape
// (32 q heads, 8 kv heads, D 128) for a decode batch through the CUDA attention backend (median of
// eager launches timed with CUDA events). "[cascade]": requests sharing a prefix of the cache, with
// and without the prefix as a cascade. "[decode-attention]": long contexts on a bf16 and an e4m3
// cache (--kv-cache-dtype fp8), the latter at several split targets.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "attention/cuda/cuda_attention.h"
#include "bench/cuda/bench_tensors.h"
#include "bench/cuda/op_timings.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "core/dtype.h"
#include "ops/cuda/cuda_backend.h"

namespace gs::bench {

namespace {

constexpr int kHq = 32, kHkv = 8, kD = 128, kBlock = 16;

// A random cache plane [blocks, ...]: bf16, or e4m3 codes of the same values; at most 1024 blocks
// of random values, repeated (the timings do not depend on the values).
Tensor random_plane(Backend& gpu, const Shape& shape, uint32_t seed, bool fp8) {
  const int64_t blocks = shape[0], per_block = shape[1] * shape[2] * shape[3], chunk = std::min<int64_t>(blocks, 1024);
  const std::vector<float> v = randn(size_t(chunk * per_block), seed);
  Tensor host;
  std::vector<uint8_t> codes;
  const Shape chunk_shape{chunk, shape[1], shape[2], shape[3]};
  if (fp8) {
    codes.resize(v.size());
    for (size_t i = 0; i < v.size(); ++i) codes[i] = f32_to_f8e4m3(v[i]);
    host = Tensor::wrap(codes.data(), chunk_shape, DType::F8E4M3, Device::cpu());
  }
  const Tensor src = fp8 ? host : on(gpu, v, chunk_shape, DType::BF16);
  Tensor t = Tensor::empty(shape, fp8 ? DType::F8E4M3 : DType::BF16, gpu.allocator());
  for (int64_t b = 0; b < blocks; b += chunk) {
    const int64_t n = std::min(chunk, blocks - b);
    gpu.copy(t.rows(b, n), src.rows(0, n));
  }
  gpu.stream().synchronize();
  return t;
}

// Median ms of 20 launches of attention on one decode batch (cascade_prefix = 0: plain), on a bf16
// or (fp8) e4m3 cache.
double time_layer(Backend& gpu, AttentionBackend& attn, int reqs, int prefix, int own, int cascade_prefix,
                  bool fp8 = false, int D = kD) {
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
  const Shape cache_shape{blocks, kBlock, kHkv, D};
  KVCacheLayer cache{random_plane(gpu, cache_shape, 1, fp8), random_plane(gpu, cache_shape, 2, fp8)};
  AttentionMetadata md;
  md.query_start_loc = on_i32(gpu, qsl, {reqs + 1});
  md.seq_lens = on_i32(gpu, seq, {reqs});
  md.block_table = on_i32(gpu, bt, {reqs, width});
  md.slot_mapping = on_i32(gpu, slots, {reqs});
  md.num_reqs = reqs, md.block_size = kBlock, md.max_blocks_per_req = width;
  attn.plan_eager(md, 1);
  md.cascade_prefix_len = cascade_prefix;
  const Tensor q = on(gpu, randn(size_t(reqs) * kHq * D, 3), {reqs, kHq * D}, DType::BF16);
  const Tensor k = on(gpu, randn(size_t(reqs) * kHkv * D, 4), {reqs, kHkv * D}, DType::BF16);
  const Tensor v = on(gpu, randn(size_t(reqs) * kHkv * D, 5), {reqs, kHkv * D}, DType::BF16);
  const Tensor out = Tensor::empty({reqs, kHq * D}, DType::BF16, gpu.allocator());
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
  attn->prepare_cascade();
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

void time_decode_attention() {
  auto gpu = make_cuda_backend(0, DType::BF16);
  for (const int D : {128, 64})
    for (const int reqs : {1, 32, 128})
      for (const int ctx : {2048, 8192}) {
        const double bytes = 2.0 * kHkv * D * reqs * ctx;  // the keys' K and V of one layer, a byte an element
        auto plain = make_cuda_attention(*gpu, AttentionShape{kHq, kHkv, D, 0.0f});
        const double bf16 = time_layer(*gpu, *plain, reqs, 0, ctx, 0, false, D);
        printf("[decode-attention] D %d, %d requests x %d tokens: bf16 %.3f ms (%.2f TB/s)", D, reqs, ctx, bf16,
               2 * bytes / bf16 * 1e-9);
        const double f8 = time_layer(*gpu, *plain, reqs, 0, ctx, 0, true, D);
        printf(", e4m3 %.3f ms (%.2f TB/s, %.2fx)\n", f8, bytes / f8 * 1e-9, f8 / bf16);
      }
}

}  // namespace gs::bench
