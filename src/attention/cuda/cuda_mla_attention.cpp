// Implements attention/cuda/cuda_mla_attention.h.
#include "attention/cuda/cuda_mla_attention.h"

#include <optional>
#include <type_traits>

#include "attention/cuda/mla_kernels.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "ops/cuda/lt_gemm.h"

namespace gs {

namespace {

void need(const Tensor& t, DType d, const char* name) {
  GS_CHECK(t.defined() && t.device().is_cuda() && t.dtype() == d,
           "cuda MLA attention: {} must be {} on the GPU, got {}", name, dtype_name(d),
           t.defined() ? t.str() : std::string("undefined"));
}

class CudaMlaAttention final : public MlaAttentionBackend {
 public:
  CudaMlaAttention(Backend& backend, const MlaShape& shape) : MlaAttentionBackend(shape), backend_(backend) {
    auto* cs = dynamic_cast<CudaStream*>(&backend.stream());
    GS_CHECK(cs, "cuda MLA attention needs the CUDA backend, got backend '{}'", backend.name());
    stream_ = cs->handle();
    dtype_ = backend.compute_dtype();
    GS_CHECK(dtype_ == DType::BF16 || dtype_ == DType::F32,
             "cuda MLA attention: compute dtype {} is not supported (bf16 or f32)", dtype_name(dtype_));
    dims_ = {shape.num_heads,  shape.kv_lora_rank, shape.qk_nope_head_dim, shape.qk_rope_head_dim,
             shape.v_head_dim, shape.scale,        shape.rope_scale,       shape.rope_interleave};
    GS_CHECK(
        cuda::mla_dims_supported(dims_),
        "cuda MLA attention: {} heads, kv_lora_rank {} (a multiple of 8, at most {}), nope {} and rope {} (at most "
        "256, rope even) are not supported",
        shape.num_heads, shape.kv_lora_rank, cuda::kMlaMaxLoraRank, shape.qk_nope_head_dim, shape.qk_rope_head_dim);
    const std::vector<float> f = rope_inv_freq(shape.rope);
    inv_freq_ = backend.upload(f.data(), DType::F32, {int64_t(f.size())}, DType::F32);
    int device = 0;
    GS_CUDA_CHECK(cudaGetDevice(&device));
    GS_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device));
    o_part_ =
        Tensor::empty({cuda::kMlaSplitRows, shape.num_heads, shape.kv_lora_rank}, DType::F32, backend.allocator());
    ml_part_ = Tensor::empty({cuda::kMlaSplitRows, shape.num_heads, 2}, DType::F32, backend.allocator());
    GS_CUDA_CHECK(dtype_ == DType::BF16 ? cuda::prepare_mla<uint16_t>(dims_) : cuda::prepare_mla<float>(dims_));
    if (dtype_ == DType::BF16) lt_.emplace(backend.allocator());  // the long launches' GEMMs
    tensor_core_ = dtype_ == DType::BF16 && cuda::mla_attend_mma_supported(dims_);
    if (tensor_core_) GS_CUDA_CHECK(cuda::prepare_mla_attend_mma(dims_));
  }

  std::string name() const override { return tensor_core_ ? "mla-cuda (tensor-core attend)" : "mla-cuda"; }
  AttentionCGSupport cudagraph_support() const override { return AttentionCGSupport::ALWAYS; }

  void forward_mla(const MlaForwardArgs& a, const KVCacheLayer& cache, const AttentionMetadata& md) override {
    const MlaShape& s = shape_;
    const int64_t T = a.q.dim(0), H = s.num_heads;
    for (auto [t, n] :
         {std::pair{&a.q, "q"}, {&a.kv_a, "kv_a"}, {&a.kv_a_norm, "kv_a_norm"}, {&a.kv_b, "kv_b"}, {&a.out, "out"}})
      need(*t, dtype_, n);
    need(cache.k, cache.fp8() ? DType::F8E4M3 : dtype_, "the cache");
    GS_CHECK(!cache.fp8() || cache.scales_valid(),
             "cuda MLA attention: the e4m3 cache's scale {} must be finite and > 0", cache.k_scale);
    GS_CHECK(!cache.fp8() || s.latent_dim() % 8 == 0,
             "cuda MLA attention: an e4m3 latent cache needs kv_lora_rank + qk_rope_head_dim ({}) a multiple of 8",
             s.latent_dim());
    need(a.q_latent, DType::F32, "q_latent");
    need(a.o_latent, DType::F32, "o_latent");
    GS_CHECK(a.q.numel() == T * H * s.qk_head_dim() && a.kv_a.numel() == T * s.latent_dim() &&
                 a.out.numel() == T * H * s.v_head_dim && a.q_latent.numel() >= T * H * s.latent_dim() &&
                 a.o_latent.numel() >= T * H * s.kv_lora_rank && a.positions.numel() >= T &&
                 a.kv_b.numel() == H * int64_t(s.qk_nope_head_dim + s.v_head_dim) * s.kv_lora_rank,
             "cuda MLA attention: q {}, kv_a {}, out {}, scratch {} / {} do not match {} tokens of {} heads", a.q.str(),
             a.kv_a.str(), a.out.str(), a.q_latent.str(), a.o_latent.str(), T, H);
    const Shape cs = cache.k.shape();
    GS_CHECK(cs.size() == 4 && cs[1] == md.block_size && cs[2] == 1 && cs[3] == s.latent_dim(),
             "cuda MLA attention: cache {} must be [blocks, {}, 1, {}]", cache.k.str(), md.block_size, s.latent_dim());
    for (const Tensor* t : {&a.kv_b, &cache.k, &a.q_latent, &a.o_latent})
      GS_CHECK(reinterpret_cast<uintptr_t>(t->data()) % 16 == 0, "cuda MLA attention: {} must be 16-byte aligned",
               t->str());
    if (dtype_ == DType::BF16)
      launch<uint16_t>(a, cache, md, int(T));
    else
      launch<float>(a, cache, md, int(T));
  }

 private:
  template <typename S>
  void launch(const MlaForwardArgs& a, const KVCacheLayer& cache, const AttentionMetadata& md, int T) {
    cuda::MlaLaunch<S> l{a.q.data_as<const S>(),
                         a.kv_a.data_as<const S>(),
                         a.kv_a_norm.data_as<const S>(),
                         a.kv_b.data_as<const S>(),
                         a.positions.data_as<const int32_t>(),
                         inv_freq_.data_as<const float>(),
                         cache.fp8() ? nullptr : cache.k.data_as<S>(),
                         a.out.data_as<S>(),
                         a.q_latent.data_as<float>(),
                         a.o_latent.data_as<float>(),
                         o_part_.data_as<float>(),
                         ml_part_.data_as<float>(),
                         md.query_start_loc.data_as<const int32_t>(),
                         md.seq_lens.data_as<const int32_t>(),
                         md.block_table.data_as<const int32_t>(),
                         md.slot_mapping.data_as<const int32_t>(),
                         T,
                         md.num_reqs_padded,
                         md.block_size,
                         md.max_blocks_per_req,
                         cuda::mla_splits(T, shape_.num_heads, sm_count_),
                         shape_.kv_norm_eps,
                         dims_};
    if (cache.fp8()) l.cache8 = cache.k.data_as<uint8_t>(), l.cache_scale = cache.k_scale;
    l.tensor_core = tensor_core_;
    l.gemms_apart = std::is_same_v<S, uint16_t> && T >= kGemmMinTokens;
    GS_CUDA_CHECK(cuda::launch_mla_absorb(l, stream_));
    const MlaShape& s = shape_;
    const int H = s.num_heads, L = s.kv_lora_rank, nope = s.qk_nope_head_dim, v = s.v_head_dim;
    const int64_t head_rows = int64_t(nope + v) * L;  // kv_b's rows of a head: W_UK's nope, W_UV's v
    if (l.gemms_apart)                                // q_latent[t, h, :L] = q_nope[t, h] W_UK_h ([nope, L] rows)
      lt_->matmul_batched(a.q.data(), a.kv_b.data(), a.q_latent.data(), false, true, T, L, nope,
                          {.count = H,
                           .ldx = int64_t(H) * s.qk_head_dim(),
                           .x_stride = s.qk_head_dim(),
                           .w_stride = head_rows,
                           .y_stride = s.latent_dim(),
                           .ldy = int64_t(H) * s.latent_dim(),
                           .w_kn = true},
                          stream_);
    GS_CUDA_CHECK(cuda::launch_mla_attend(l, stream_));
    if (l.gemms_apart)  // out[t, h] = W_UV_h ([v, L] rows) o_latent[t, h], o_latent in bf16 over q_latent
      lt_->matmul_batched(a.q_latent.data(), a.kv_b.data_as<const uint16_t>() + int64_t(nope) * L, a.out.data(), false,
                          false, T, v, L,
                          {.count = H,
                           .ldx = int64_t(H) * L,
                           .x_stride = L,
                           .w_stride = head_rows,
                           .y_stride = v,
                           .ldy = int64_t(H) * v},
                          stream_);
  }

  // bf16 launches of at least this many (padded) tokens run absorption and W_UV as cuBLASLt
  // batched GEMMs (a batch a head) instead of the register-tiled CUDA-core kernels, which serve
  // decode batches at the latency of one weight read.
  static constexpr int kGemmMinTokens = 128;

  Backend& backend_;
  std::optional<LtGemm> lt_;  // bf16 only
  cudaStream_t stream_ = nullptr;
  DType dtype_ = DType::BF16;
  cuda::MlaDims dims_{};
  int sm_count_ = 0;
  bool tensor_core_ = false;  // bf16 at dims the tensor-core attend is built for
  Tensor inv_freq_;
  Tensor o_part_, ml_part_;  // the context splits' partial outputs (cuda::MlaLaunch)
};

}  // namespace

std::unique_ptr<MlaAttentionBackend> make_cuda_mla_attention(Backend& backend, const MlaShape& shape) {
  return std::make_unique<CudaMlaAttention>(backend, shape);
}

}  // namespace gs
