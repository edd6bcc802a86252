// Decode attention timings of `graphserve bench ops`: one attention layer of the Llama-3.1-8B shape
// (32 q heads, 8 kv heads, D 128) for a decode batch through the CUDA attention backend (median of
// eager launches timed with CUDA events). "[cascade]": requests sharing a prefix of the cache, with
// and without the prefix as a cascade. "[decode-attention]": long contexts on a bf16 and an e4m3
// cache (--kv-cache-dtype fp8), each at several decode split rules (ratios against bf16's default).
// "[decode-kernels]": each decode kernel against the default selection, GQA 2 and 4, from one
// request to 192 and from 128 tokens to 8k.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "attention/attention_kernel_selection.h"
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

// Median ms of 20 launches of attention on one decode batch (cascade_prefix = 0: plain), on a bf16
// or (fp8) e4m3 cache, by each of `attns` in turn (the same cache and batch).
std::vector<double> time_layer(Backend& gpu, const std::vector<AttentionBackend*>& attns, int reqs, int prefix, int own,
                               int cascade_prefix, bool fp8 = false, int D = kD, int hq = kHq) {
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
  KVCacheLayer cache{random_cache_plane(gpu, cache_shape, 1, fp8), random_cache_plane(gpu, cache_shape, 2, fp8)};
  AttentionMetadata md;
  md.query_start_loc = on_i32(gpu, qsl, {reqs + 1});
  md.seq_lens = on_i32(gpu, seq, {reqs});
  md.block_table = on_i32(gpu, bt, {reqs, width});
  md.slot_mapping = on_i32(gpu, slots, {reqs});
  md.num_reqs = reqs, md.block_size = kBlock, md.max_blocks_per_req = width;
  for (AttentionBackend* attn : attns) attn->plan_eager(md, 1);
  md.cascade_prefix_len = cascade_prefix;
  const Tensor q = on(gpu, randn(size_t(reqs) * hq * D, 3), {reqs, hq * D}, DType::BF16);
  const Tensor k = on(gpu, randn(size_t(reqs) * kHkv * D, 4), {reqs, kHkv * D}, DType::BF16);
  const Tensor v = on(gpu, randn(size_t(reqs) * kHkv * D, 5), {reqs, kHkv * D}, DType::BF16);
  const Tensor out = Tensor::empty({reqs, hq * D}, DType::BF16, gpu.allocator());
  const cudaStream_t s = dynamic_cast<CudaStream&>(gpu.stream()).handle();
  std::vector<double> medians;
  for (AttentionBackend* attn : attns) {
    attn->forward(q, k, v, cache, md, out);
    GS_CUDA_CHECK(cudaStreamSynchronize(s));
    std::vector<double> ms;
    for (int i = 0; i < 20; ++i) {
      CudaEventTimer t(s);
      t.start();
      attn->forward(q, k, v, cache, md, out);
      t.stop();
      ms.push_back(t.elapsed_ms());
    }
    std::sort(ms.begin(), ms.end());
    medians.push_back(ms[ms.size() / 2]);
  }
  return medians;
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
    const double plain = time_layer(*gpu, {attn.get()}, b.reqs, b.prefix, b.own, 0)[0];
    const double cascade = time_layer(*gpu, {attn.get()}, b.reqs, b.prefix, b.own, b.prefix)[0];
    printf(
        "[cascade] decode attention D %d, %d requests, %d shared + %d own tokens: plain %.3f ms, cascade %.3f ms "
        "(%.2fx)\n",
        kD, b.reqs, b.prefix, b.own, plain, cascade, plain / cascade);
  }
}

// Each shape under the default split rule and others (decode_split_target / _min_tiles / _max_tiles).
void time_decode_attention() {
  auto gpu = make_cuda_backend(0, DType::BF16);
  struct Split {
    int target, min_tiles, max_tiles;
  };
  const AttentionKernelOptions defaults;
  const std::vector<Split> splits{
      {defaults.decode_split_target, defaults.decode_split_min_tiles, defaults.decode_split_max_tiles},
      {256, 2, 0},
      {1024, 4, 0}};
  for (const int D : {128, 64}) {
    std::vector<std::unique_ptr<AttentionBackend>> owned;
    std::vector<AttentionBackend*> attns;
    for (const Split sp : splits) {
      AttentionKernelOptions o;
      o.decode_split_target = sp.target, o.decode_split_min_tiles = sp.min_tiles,
      o.decode_split_max_tiles = sp.max_tiles;
      owned.push_back(make_cuda_attention(*gpu, AttentionShape{kHq, kHkv, D, 0.0f}, o));
      attns.push_back(owned.back().get());
    }
    for (const int reqs : {1, 32, 128})
      for (const int ctx : {2048, 8192}) {
        const double bytes = 2.0 * kHkv * D * reqs * ctx;  // the keys' K and V of one layer, a byte an element
        const std::vector<double> bf16 = time_layer(*gpu, attns, reqs, 0, ctx, 0, false, D);
        const std::vector<double> f8 = time_layer(*gpu, attns, reqs, 0, ctx, 0, true, D);
        for (size_t i = 0; i < splits.size(); ++i)
          printf(
              "[decode-attention] D %d, %d requests x %d tokens, splits %d / %d / %d: bf16 %.3f ms (%.2f TB/s), e4m3 "
              "%.3f ms (%.2f TB/s, %.2fx)\n",
              D, reqs, ctx, splits[i].target, splits[i].min_tiles, splits[i].max_tiles, bf16[i],
              2 * bytes / bf16[i] * 1e-9, f8[i], bytes / f8[i] * 1e-9, f8[i] / bf16[0]);
      }
  }
}

void time_decode_kernels() {
  auto gpu = make_cuda_backend(0, DType::BF16);
  struct Variant {
    const char* name;
    AttentionKernelOptions o;
    int max_group = kKeysAsRowsMaxGroup;  // the largest GQA group its kernel holds
  };
  auto with = [](auto set) {
    AttentionKernelOptions o;
    set(o);
    return o;
  };
  const std::vector<Variant> variants{
      {"default", {}},
      {"keys-as-rows", with([](AttentionKernelOptions& o) { o.warp_per_pair_min_pairs = 0; })},
      {"tensor-core",
       with([](AttentionKernelOptions& o) { o.warp_per_pair_min_pairs = 0, o.keys_as_rows_decode = false; })},
      {"warp-per-pair",
       with([](AttentionKernelOptions& o) { o.warp_per_pair_min_pairs = 1, o.warp_per_pair_max_pairs = 0; }),
       kWarpPerPairMaxGroup},
  };
  for (const int hq : {16, 32}) {  // GQA 2 (Qwen3-0.6B) and 4 (Llama-3.1-8B)
    std::vector<std::unique_ptr<AttentionBackend>> owned;
    std::vector<AttentionBackend*> attns;
    std::vector<const char*> names;
    for (const Variant& v : variants) {
      if (hq / kHkv > v.max_group) continue;
      owned.push_back(make_cuda_attention(*gpu, AttentionShape{hq, kHkv, kD, 0.0f}, v.o));
      attns.push_back(owned.back().get());
      names.push_back(v.name);
    }
    for (const int reqs : {1, 16, 32, 64, 96, 128, 192})
      for (const int ctx : {128, 512, 2048, 8192}) {
        const double bytes = 2.0 * 2 * kHkv * kD * reqs * ctx;  // K and V of one layer in bf16
        const std::vector<double> ms = time_layer(*gpu, attns, reqs, 0, ctx, 0, false, kD, hq);
        std::string line;
        for (size_t i = 0; i < attns.size(); ++i)
          line += fmt::format("  {} {:.1f} us ({:.2f} TB/s)", names[i], ms[i] * 1e3, bytes / ms[i] * 1e-9);
        printf("[decode-kernels] D %d, %d / %d heads, %d requests x %d tokens:%s\n", kD, hq, kHkv, reqs, ctx,
               line.c_str());
      }
  }
}

}  // namespace gs::bench
