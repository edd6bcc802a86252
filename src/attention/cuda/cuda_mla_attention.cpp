// Implements attention/cuda/cuda_mla_attention.h.
#include "attention/cuda/cuda_mla_attention.h"

#include <algorithm>
#include <optional>
#include <type_traits>

#include "attention/attention_kernel_selection.h"
#include "attention/cuda/mla_kernels.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "core/logging.h"
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
  CudaMlaAttention(Backend& backend, const MlaShape& shape, int max_context)
      : MlaAttentionBackend(shape), backend_(backend) {
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
    if (dtype_ == DType::BF16 && cuda::mla_expanded_supported(dims_)) {
      const int64_t kv_width = int64_t(shape.num_heads) * (shape.qk_nope_head_dim + shape.v_head_dim);
      const int64_t row_bytes = 2 * (shape.latent_dim() + kv_width);
      expanded_rows_ = mla_expanded_scratch_rows(row_bytes, max_context, kExpandedRowQuantum);
      exp_lat_ = Tensor::empty({expanded_rows_, shape.latent_dim()}, DType::BF16, backend.allocator());
      exp_kv_ = Tensor::empty({expanded_rows_, kv_width}, DType::BF16, backend.allocator());
      backend.fill_zero(exp_lat_);  // the GEMM's rows past a launch's context are read, never used
      GS_CUDA_CHECK(cuda::prepare_mla_expanded());
      spdlog::info(
          "MLA expanded prefill: {:.0f} MiB of scratch, contexts of up to {} tokens (longer ones run absorbed)",
          double(expanded_rows_) * double(row_bytes) / double(1 << 20), expanded_rows_);
    }
  }

  std::string name() const override {
    std::string n = "mla-cuda";
    if (tensor_core_) n += " (tensor-core attend";
    if (expanded_rows_ > 0) n += tensor_core_ ? ", expanded prefill" : " (expanded prefill";
    return tensor_core_ || expanded_rows_ > 0 ? n + ")" : n;
  }
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
    // Requests [first, num_reqs) run in the expanded form, tokens [0, t_abs) absorbed.
    const int first = mla_expanded_first_request(md.host_query_start_loc, md.host_seq_lens, md.num_reqs,
                                                 std::is_same_v<S, uint16_t> ? expanded_rows_ : 0);
    const bool expanded = first < md.num_reqs;
    const int t_abs = expanded ? md.host_query_start_loc[size_t(first)] : T;
    l.gemms_apart = std::is_same_v<S, uint16_t> && (T >= kGemmMinTokens || expanded);
    GS_CUDA_CHECK(cuda::launch_mla_absorb(l, stream_));  // every token's latent row and rotated q_pe
    if (l.gemms_apart && t_abs > 0) absorb_gemm(a, t_abs);
    if constexpr (std::is_same_v<S, uint16_t>)
      if (expanded) run_expanded(a, cache, md, first);
    if (t_abs > 0) {
      cuda::MlaLaunch<S> la = l;
      if (expanded)
        la.num_tokens = t_abs, la.num_reqs = first, la.splits = cuda::mla_splits(t_abs, shape_.num_heads, sm_count_);
      GS_CUDA_CHECK(cuda::launch_mla_attend(la, stream_));
      if (l.gemms_apart) expand_gemm(a, t_abs);
    }
    const int actual = expanded ? md.host_query_start_loc[size_t(md.num_reqs)] : T;
    if (actual < T) {  // padded tokens' rows: zeros, as the absorbed kernels write them
      const int64_t row = int64_t(shape_.num_heads) * shape_.v_head_dim * int64_t(sizeof(S));
      GS_CUDA_CHECK(
          cudaMemsetAsync(static_cast<char*>(a.out.data()) + actual * row, 0, size_t((T - actual) * row), stream_));
    }
  }

  // q_latent[t, h, :L] = q_nope[t, h] W_UK_h ([nope, L] rows) for tokens [0, M).
  void absorb_gemm(const MlaForwardArgs& a, int M) {
    const MlaShape& s = shape_;
    const int H = s.num_heads, L = s.kv_lora_rank, nope = s.qk_nope_head_dim;
    lt_->matmul_batched(a.q.data(), a.kv_b.data(), a.q_latent.data(), false, true, M, L, nope,
                        {.count = H,
                         .ldx = int64_t(H) * s.qk_head_dim(),
                         .x_stride = s.qk_head_dim(),
                         .w_stride = head_rows(),
                         .y_stride = s.latent_dim(),
                         .ldy = int64_t(H) * s.latent_dim(),
                         .w_kn = true},
                        stream_);
  }

  // out[t, h] = W_UV_h ([v, L] rows) o_latent[t, h] for tokens [0, M), o_latent in bf16 over q_latent.
  void expand_gemm(const MlaForwardArgs& a, int M) {
    const MlaShape& s = shape_;
    const int H = s.num_heads, L = s.kv_lora_rank, v = s.v_head_dim;
    lt_->matmul_batched(a.q_latent.data(), a.kv_b.data_as<const uint16_t>() + int64_t(s.qk_nope_head_dim) * L,
                        a.out.data(), false, false, M, v, L,
                        {.count = H,
                         .ldx = int64_t(H) * L,
                         .x_stride = L,
                         .w_stride = head_rows(),
                         .y_stride = v,
                         .ldy = int64_t(H) * v},
                        stream_);
  }

  int64_t head_rows() const {  // kv_b's rows of a head: W_UK's nope, W_UV's v
    return int64_t(shape_.qk_nope_head_dim + shape_.v_head_dim) * shape_.kv_lora_rank;
  }

  // Requests [first, num_reqs) in the expanded form, in launches of at most kMlaMaxExpandedReqs
  // requests whose contexts fit the scratch together: gather, up-project (kv = lat kv_b^T), attend.
  void run_expanded(const MlaForwardArgs& a, const KVCacheLayer& cache, const AttentionMetadata& md, int first) {
    const MlaShape& s = shape_;
    cuda::MlaExpandedLaunch e{};
    e.q = a.q.data_as<const uint16_t>();
    e.q_latent = a.q_latent.data_as<const float>();
    e.cache = cache.fp8() ? nullptr : cache.k.data_as<const uint16_t>();
    e.cache8 = cache.fp8() ? cache.k.data_as<const uint8_t>() : nullptr;
    e.cache_scale = cache.fp8() ? cache.k_scale : 1.0f;
    e.block_table = md.block_table.data_as<const int32_t>();
    e.block_size = md.block_size, e.max_blocks = md.max_blocks_per_req;
    e.lat = exp_lat_.data_as<uint16_t>(), e.kv = exp_kv_.data_as<uint16_t>(), e.out = a.out.data_as<uint16_t>();
    e.d = dims_;
    const auto rows = [&] { return e.num_reqs > 0 ? e.req[e.num_reqs - 1].kv0 + e.req[e.num_reqs - 1].ctx : 0; };
    const auto flush = [&] {
      if (e.num_reqs == 0) return;
      const int m = (rows() + kExpandedRowQuantum - 1) / kExpandedRowQuantum * kExpandedRowQuantum;
      GS_CUDA_CHECK(cuda::launch_mla_gather(e, stream_));
      lt_->matmul_batched(e.lat, a.kv_b.data(), e.kv, false, false, m, int(exp_kv_.dim(1)), s.kv_lora_rank,
                          {.ldx = s.latent_dim()}, stream_);
      GS_CUDA_CHECK(cuda::launch_mla_expanded(e, stream_));
      e.num_reqs = e.num_tiles = e.max_ctx = 0;
    };
    for (int r = first; r < md.num_reqs; ++r) {
      const int tok0 = md.host_query_start_loc[size_t(r)], qlen = md.host_query_start_loc[size_t(r) + 1] - tok0;
      const int ctx = md.host_seq_lens[size_t(r)];
      if (e.num_reqs == cuda::kMlaMaxExpandedReqs || rows() + ctx > expanded_rows_) flush();
      e.req[e.num_reqs] = {r, tok0, qlen, ctx, rows(), e.num_tiles};
      ++e.num_reqs;
      e.num_tiles += (qlen + cuda::kMlaExpandedTileTokens - 1) / cuda::kMlaExpandedTileTokens;
      e.max_ctx = std::max(e.max_ctx, ctx);
    }
    flush();
  }

  // bf16 launches of at least this many (padded) tokens run absorption and W_UV as cuBLASLt
  // batched GEMMs (a batch a head) instead of the register-tiled CUDA-core kernels, which serve
  // decode batches at the latency of one weight read.
  static constexpr int kGemmMinTokens = 128;
  // The row multiple of the expanded form's scratch and of its GEMMs (so their cached plans stay
  // few).
  static constexpr int kExpandedRowQuantum = 128;
  Backend& backend_;
  std::optional<LtGemm> lt_;  // bf16 only
  cudaStream_t stream_ = nullptr;
  DType dtype_ = DType::BF16;
  cuda::MlaDims dims_{};
  int sm_count_ = 0;
  bool tensor_core_ = false;  // bf16 at dims the tensor-core attend is built for
  int expanded_rows_ = 0;     // context rows the expanded form's scratch holds (0: bf16 at its dims only)
  Tensor exp_lat_, exp_kv_;   // that scratch (cuda::MlaExpandedLaunch::lat, kv)
  Tensor inv_freq_;
  Tensor o_part_, ml_part_;  // the context splits' partial outputs (cuda::MlaLaunch)
};

}  // namespace

std::unique_ptr<MlaAttentionBackend> make_cuda_mla_attention(Backend& backend, const MlaShape& shape, int max_context) {
  return std::make_unique<CudaMlaAttention>(backend, shape, max_context);
}

}  // namespace gs
