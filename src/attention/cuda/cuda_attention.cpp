// Implements attention/cuda/cuda_attention.h.
#include "attention/cuda/cuda_attention.h"

#include <algorithm>
#include <cmath>

#include "attention/attention_kernel_selection.h"
#include "attention/cuda/cascade_attention.h"
#include "attention/cuda/decode_attention.h"
#include "attention/cuda/flash_decoding_attention.h"
#include "attention/cuda/fp8_kv_cache.h"
#include "attention/cuda/prefill_attention.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"

namespace gs {

namespace {

void need(const Tensor& t, DType d, const char* name) {
  GS_CHECK(t.defined() && t.device().is_cuda() && t.dtype() == d, "cuda attention: {} must be {} on the GPU, got {}",
           name, dtype_name(d), t.defined() ? t.str() : std::string("undefined"));
}

class CudaAttention final : public AttentionBackend {
 public:
  CudaAttention(Backend& backend, const AttentionShape& shape, const AttentionKernelOptions& options)
      : backend_(backend), shape_(shape), options_(options) {
    if (shape_.scale <= 0 && shape_.head_dim > 0) shape_.scale = 1.0f / std::sqrt(float(shape_.head_dim));
    auto* cs = dynamic_cast<CudaStream*>(&backend.stream());
    GS_CHECK(cs, "cuda attention needs the CUDA backend, got backend '{}'", backend.name());
    stream_ = cs->handle();
    GS_CHECK(shape.num_heads > 0 && shape.num_kv_heads > 0 && shape.num_heads % shape.num_kv_heads == 0,
             "cuda attention: num_heads {} must be a positive multiple of num_kv_heads {}", shape.num_heads,
             shape.num_kv_heads);
    GS_CHECK(shape.head_dim > 0 && shape.head_dim <= cuda::kMaxAttentionHeadDim,
             "cuda attention: head_dim {} is not in [1, {}]", shape.head_dim, cuda::kMaxAttentionHeadDim);
    dtype_ = backend.compute_dtype();
    GS_CHECK(dtype_ == DType::BF16 || dtype_ == DType::F32,
             "cuda attention: compute dtype {} is not supported (bf16 or f32)", dtype_name(dtype_));
    // Fixed-size flash-decoding workspace: its size does not depend on the batch.
    split_ws_ =
        Tensor::empty({int64_t(cuda::split_workspace_floats(shape_.head_dim))}, DType::F32, backend.allocator());
    // The split path's arrival counters start at zero; each launch leaves them zero again.
    split_counters_ = Tensor::empty({cuda::kSplitCounters}, DType::I32, backend.allocator());
    GS_CUDA_CHECK(cudaMemsetAsync(split_counters_.data(), 0, split_counters_.nbytes(), stream_));
    int device = 0;
    GS_CUDA_CHECK(cudaGetDevice(&device));
    GS_CUDA_CHECK(cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, device));
  }

  std::string name() const override { return "cuda_paged"; }
  void prepare_cascade() override {
    if (supports_cascade() && !cascade_ws_.defined())
      cascade_ws_ = Tensor::empty({int64_t(cuda::cascade_workspace_floats(shape_.num_heads, shape_.head_dim))},
                                  DType::F32, backend_.allocator());
  }
  AttentionCGSupport cudagraph_support() const override { return AttentionCGSupport::ALWAYS; }
  // Cascade runs on the tensor-core kernels (cuda/cascade_attention.h): where they hold the layer
  // (never with sinks).
  bool supports_cascade() const override {
    return !shape_.sinks && cascade_attention_fits(launch_of(0, 0, true), options_);
  }
  CascadeHeuristic cascade_heuristic() const override {
    return {.num_sms = num_sms_, .max_tokens = cuda::kCascadeMaxTokens};
  }

  void forward(const Tensor& q, const Tensor& k, const Tensor& v, const KVCacheLayer& cache,
               const AttentionMetadata& md, const Tensor& out, int window) override {
    forward_with_sinks(q, k, v, cache, md, out, window, Tensor());
  }

  // Sinks run on flash-decoding (attention_kernel_selection.h), never cascaded.
  bool supports_sinks() const override { return true; }
  void forward_with_sinks(const Tensor& q, const Tensor& k, const Tensor& v, const KVCacheLayer& cache,
                          const AttentionMetadata& md, const Tensor& out, int window, const Tensor& sinks) override {
    const int hq = shape_.num_heads, hkv = shape_.num_kv_heads, D = shape_.head_dim;
    const int64_t T = q.ndim() >= 1 ? q.dim(0) : 0;
    check_inputs(q, k, v, cache, md, out, T);
    cuda::PagedAttentionParams p;
    p.q = q.data();
    p.k = k.data();
    p.v = v.data();
    p.out = out.data();
    p.slot_mapping = md.slot_mapping.data_as<int32_t>();
    p.num_slots = cache.k.dim(0) * cache.k.dim(1);
    p.k_cache = cache.k.data();
    p.v_cache = cache.v.data();
    p.f32 = dtype_ == DType::F32;
    p.fp8_cache = cache.fp8();
    p.k_scale = cache.k_scale;
    p.v_scale = cache.v_scale;
    p.split_workspace = split_ws_.data_as<float>();
    p.split_counters = static_cast<unsigned*>(split_counters_.data());
    p.query_start_loc = md.query_start_loc.data_as<int32_t>();
    p.seq_lens = md.seq_lens.data_as<int32_t>();
    p.block_table = md.block_table.data_as<int32_t>();
    p.num_reqs_padded = std::max(md.num_reqs_padded, md.num_reqs);
    p.max_blocks_per_req = md.max_blocks_per_req > 0 ? md.max_blocks_per_req : int(md.block_table.row_elems());
    p.block_size = int(cache.k.dim(1));
    p.num_blocks = int(cache.k.dim(0));
    p.hq = hq;
    p.hkv = hkv;
    p.D = D;
    p.scale = shape_.scale;
    p.window = window;
    p.softcap = shape_.softcap;
    if (sinks.defined()) {
      need(sinks, DType::F32, "sinks");
      GS_CHECK(sinks.numel() == hq, "cuda attention: sinks {} must have {} elements", sinks.str(), hq);
      p.sinks = sinks.data_as<float>();
    }
    AttentionLaunch launch = launch_of(md.max_query_len, p.num_reqs_padded, cuda::attention_buffers_aligned16(p));
    launch.sinks = sinks.defined();
    launch.fp8_cache = p.fp8_cache;
    if (p.fp8_cache) {
      GS_CHECK(tensor_core_attention_fits(launch),
               "--kv-cache-dtype fp8 runs on the tensor-core attention kernels, which need bf16, head dim 64 or 128, "
               "at most {} query heads per kv head, no soft-capping and no attention sinks; this layer has {}, head "
               "dim {}, {} heads per kv head{}{}; use --kv-cache-dtype auto",
               kTensorCoreMaxGroup, dtype_name(dtype_), D, hq / hkv, shape_.softcap > 0 ? ", soft-capping" : "",
               sinks.defined() ? ", sinks" : "");
    }
    const AttentionKernel kernel = select_attention_kernel(launch, options_);
    // The keys-as-rows decode kernel quantizes and stores this step's rows itself; the tensor-core
    // kernels read every position from an e4m3 cache, so it is written first.
    if (p.fp8_cache && kernel != AttentionKernel::KeysAsRowsDecode)
      GS_CUDA_CHECK(cuda::write_fp8_kv_cache(p, int(T), stream_));
    // A cascade batch of more q rows than the workspace holds (a padded shape past the heuristic's
    // limit) or with buffers the tensor-core kernels cannot read attends without cascading.
    if (md.cascade_prefix_len > 0 && window <= 0 && T <= cuda::kCascadeMaxTokens && cascade_ws_.defined() &&
        cascade_attention_fits(launch, options_)) {
      GS_CUDA_CHECK(cuda::cascade_attention(p, options_, select_cascade_suffix_kernel(launch), md.cascade_prefix_len,
                                            int(T), cascade_ws_.data_as<float>(), stream_));
      return;
    }
    GS_CUDA_CHECK(run(kernel, p, window, int(T)));
  }

 private:
  AttentionLaunch launch_of(int max_query_len, int num_reqs_padded, bool aligned16) const {
    AttentionLaunch launch;
    launch.bf16 = dtype_ == DType::BF16;
    launch.aligned16 = aligned16;
    launch.num_heads = shape_.num_heads;
    launch.num_kv_heads = shape_.num_kv_heads;
    launch.head_dim = shape_.head_dim;
    launch.softcap = shape_.softcap;
    launch.max_query_len = max_query_len;
    launch.num_reqs_padded = num_reqs_padded;
    return launch;
  }

  cudaError_t run(AttentionKernel kernel, const cuda::PagedAttentionParams& p, int window, int T) const {
    switch (kernel) {
      case AttentionKernel::TensorCorePrefill: return cuda::prefill_attention(p, options_, window, T, stream_);
      case AttentionKernel::TensorCoreDecode:
        return cuda::tensor_core_decode_attention(p, options_, window, T, stream_);
      case AttentionKernel::KeysAsRowsDecode:
        return cuda::keys_as_rows_decode_attention(p, options_, window, T, stream_);
      case AttentionKernel::WarpPerPairDecode:
        return cuda::warp_per_pair_decode_attention(p, options_, window, T, stream_);
      case AttentionKernel::FlashDecoding: break;
    }
    return cuda::flash_decoding_attention(p, T, stream_);
  }

  void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const KVCacheLayer& cache,
                    const AttentionMetadata& md, const Tensor& out, int64_t T) const {
    const int hq = shape_.num_heads, hkv = shape_.num_kv_heads, D = shape_.head_dim;
    for (auto [t, n] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}, {&out, "out"}}) need(*t, dtype_, n);
    const DType cache_dtype = cache.fp8() ? DType::F8E4M3 : dtype_;
    need(cache.k, cache_dtype, "cache.k");
    need(cache.v, cache_dtype, "cache.v");
    GS_CHECK(cache.scales_valid(), "cuda attention: KV-cache scales {} / {} must be finite and > 0", cache.k_scale,
             cache.v_scale);
    for (auto [t, n] : {std::pair{&md.query_start_loc, "query_start_loc"},
                        {&md.seq_lens, "seq_lens"},
                        {&md.block_table, "block_table"},
                        {&md.slot_mapping, "slot_mapping"}})
      need(*t, DType::I32, n);
    GS_CHECK(q.row_elems() == int64_t(hq) * D && out.dim(0) == T && out.row_elems() == q.row_elems(),
             "cuda attention: q {} and out {} must be [T, {}]", q.str(), out.str(), hq * D);
    GS_CHECK(k.dim(0) == T && v.dim(0) == T && k.row_elems() == int64_t(hkv) * D && v.row_elems() == k.row_elems(),
             "cuda attention: k {} and v {} must be [{}, {}]", k.str(), v.str(), T, hkv * D);
    GS_CHECK(cache.k.ndim() == 4 && cache.k.dim(2) == hkv && cache.k.dim(3) == D && cache.v.shape() == cache.k.shape(),
             "cuda attention: cache {} / {} must be [blocks, block_size, {}, {}]", cache.k.str(), cache.v.str(), hkv,
             D);
    GS_CHECK(md.block_size == 0 || md.block_size == cache.k.dim(1),
             "cuda attention: metadata block_size {} differs from the cache's {}", md.block_size, cache.k.dim(1));
    const int64_t nrp = std::max(md.num_reqs_padded, md.num_reqs);
    GS_CHECK(md.slot_mapping.numel() >= T && md.query_start_loc.numel() >= nrp + 1 && md.seq_lens.numel() >= nrp &&
                 md.block_table.ndim() == 2 && md.block_table.dim(0) >= nrp &&
                 md.max_blocks_per_req <= md.block_table.row_elems(),
             "cuda attention: metadata buffers too small for {} tokens and {} requests "
             "(slot_mapping {}, query_start_loc {}, seq_lens {}, block_table {})",
             T, nrp, md.slot_mapping.str(), md.query_start_loc.str(), md.seq_lens.str(), md.block_table.str());
  }

  Backend& backend_;
  AttentionShape shape_;
  AttentionKernelOptions options_;
  cudaStream_t stream_ = nullptr;
  DType dtype_ = DType::BF16;
  Tensor split_ws_;
  Tensor split_counters_;
  Tensor cascade_ws_;  // the cascade passes' partials (cuda/cascade_attention.h), where it can cascade
  int num_sms_ = 1;
};

}  // namespace

std::unique_ptr<AttentionBackend> make_cuda_attention(Backend& backend, const AttentionShape& shape,
                                                      const AttentionKernelOptions& options) {
  return std::make_unique<CudaAttention>(backend, shape, options);
}

}  // namespace gs
