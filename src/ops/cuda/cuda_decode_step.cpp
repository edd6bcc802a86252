#include "ops/cuda/cuda_decode_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "core/cuda/cuda_device.h"
#include "core/logging.h"
#include "ops/cuda/backend_util.h"
#include "ops/cuda/persistent_decode.h"

namespace gs::cuda_backend {

namespace {

using cuda::kPersistentMaxTokens;
using cuda::PersistentDecodeParams;
using cuda::PersistentLayer;

// Weight-ring stages a CTA keeps in flight (48 KiB): enough to stream at full bandwidth with the
// fewest bytes queued ahead of the barrier atomics and activation loads of the step's critical
// path (docs/PERF.md, "Persistent decode").
constexpr int kStagesInFlight = 3;

// The instantiations' row counts: a step of T tokens runs the smallest that holds T.
constexpr int kRowCounts[] = {1, 2, 4};

int rows_for(int T) {
  for (int M : kRowCounts)
    if (M >= T) return M;
  return 0;
}

// The shared-memory plan of each instantiation, by its row count.
using SmemPlans = std::array<cuda::PersistentSmem, kPersistentMaxTokens + 1>;

const uint16_t* bf16(const Tensor& t) { return t.defined() ? ptr<const uint16_t>(t) : nullptr; }

class CudaDecodeStep final : public DecodeStep {
 public:
  // smem[M]: the shared memory of the instantiation of M rows (M <= rows_for(max_tokens)).
  CudaDecodeStep(const DecodeStepModel& m, const Tensor& inv_freq, int max_tokens, int grid, const SmemPlans& smem,
                 Backend& be, cudaStream_t stream, bool trace)
      : m_(m), inv_freq_(inv_freq), max_tokens_(max_tokens), grid_(grid), smem_(smem), stream_(stream) {
    std::vector<PersistentLayer> layers;
    for (const DecodeStepLayer& l : m.layers)
      layers.push_back({bf16(l.input_norm), bf16(l.qkv), bf16(l.qkv_bias), bf16(l.q_norm), bf16(l.k_norm),
                        bf16(l.o_proj), bf16(l.post_norm), bf16(l.gate_up), bf16(l.down), ptr<uint16_t>(l.kv.k),
                        ptr<uint16_t>(l.kv.v)});
    layers_ = be.upload(layers.data(), DType::U8, {int64_t(layers.size() * sizeof(PersistentLayer))}, DType::U8);
    partials_ =
        Tensor::empty({int64_t(cuda::persistent_partials_floats(m.num_heads, m.head_dim))}, DType::F32, be.allocator());
    counters_ = Tensor::empty({int64_t(kPersistentMaxTokens) * m.num_kv_heads}, DType::I32, be.allocator());
    barrier_ = Tensor::empty({2}, DType::I32, be.allocator());
    be.fill_zero(counters_);
    be.fill_zero(barrier_);
    if (trace) {
      trace_ = Tensor::empty({cuda::persistent_trace_words(int(m.layers.size()))}, DType::I64, be.allocator());
      be.fill_zero(trace_);
    }
  }

  ~CudaDecodeStep() override {
    if (trace_.defined()) log_trace();
  }

  int max_tokens() const override { return max_tokens_; }

  std::string describe() const override {
    return fmt::format(
        "persistent decode kernel for steps of 1..{} requests ({} CTAs of {} threads; a weight ring of {} x {} KiB at "
        "one request)",
        max_tokens_, grid_, cuda::kPersistentThreads, smem_[1].stages, cuda::kPersistentStageBytes / 1024);
  }

  void run(const DecodeStepInputs& in) override {
    const int T = in.num_tokens;
    GS_CHECK(T >= 1 && T <= max_tokens_, "decode step of {} tokens: the persistent kernel was built for 1..{}", T,
             max_tokens_);
    GS_CHECK(in.attn, "decode step: no attention metadata");
    const AttentionMetadata& md = *in.attn;
    const int M = rows_for(T);
    PersistentDecodeParams p;
    p.layers = ptr<const PersistentLayer>(layers_);
    p.num_layers = int(m_.layers.size());
    p.embed = bf16(m_.embed);
    p.final_norm = bf16(m_.final_norm);
    p.ids = ptr<const int32_t>(in.input_ids);
    p.positions = ptr<const int32_t>(in.positions);
    p.slot_mapping = ptr<const int32_t>(md.slot_mapping);
    p.seq_lens = ptr<const int32_t>(md.seq_lens);
    p.block_table = ptr<const int32_t>(md.block_table);
    p.T = T;
    p.H = m_.hidden_size, p.I = m_.intermediate_size, p.hq = m_.num_heads, p.hkv = m_.num_kv_heads;
    p.D = m_.head_dim;
    p.eps = m_.rms_norm_eps, p.scale = m_.attention_scale;
    p.inv_freq = ptr<const float>(inv_freq_);
    p.long_from = m_.rope.long_from;
    p.block_size = md.block_size, p.max_blocks_per_req = md.max_blocks_per_req;
    p.num_slots = m_.layers.empty() ? 0 : m_.layers[0].kv.k.dim(0) * int64_t(md.block_size);
    p.residual = ptr<float>(m_.residual);
    p.qkv = ptr<uint16_t>(m_.qkv);
    p.attn_out = ptr<uint16_t>(m_.attn_out);
    p.act = ptr<uint16_t>(m_.act);
    p.hidden = ptr<uint16_t>(m_.hidden);
    p.partials = ptr<float>(partials_);
    p.counters = ptr<unsigned>(counters_);
    p.barrier = ptr<unsigned>(barrier_);
    p.trace = trace_.defined() ? ptr<unsigned long long>(trace_) : nullptr;
    const cuda::PersistentSmem& smem = smem_[size_t(M)];
    p.ring_stages = smem.stages, p.scratch_bytes = smem.scratch_bytes;
    p.stages_in_flight = std::min(smem.stages - 1, kStagesInFlight);
    GS_CUDA_CHECK(cuda::persistent_decode(p, M, grid_, smem.bytes, stream_));
  }

 private:
  // The phase trace's averages per launch and layer, by kind (persistent_decode.h).
  void log_trace() const {
    const int L = int(m_.layers.size()), B = cuda::persistent_barriers(L);
    std::vector<unsigned long long> t(size_t(cuda::persistent_trace_words(L)));
    if (cudaStreamSynchronize(stream_) != cudaSuccess ||
        cudaMemcpy(t.data(), trace_.data(), t.size() * sizeof(t[0]), cudaMemcpyDeviceToHost) != cudaSuccess)
      return;
    const double launches = double(t.back());
    if (launches == 0) return;
    static constexpr const char* kKinds[] = {"A qkv", "B attention", "C o_proj", "D gate_up", "E down"};
    std::string out =
        fmt::format("persistent decode kernel, {} launches, us per launch: embedding {:.2f} + {:.2f}", launches,
                    1e-3 * double(t[size_t(B)]) / launches, 1e-3 * double(t[size_t(B) + 1]) / launches);
    for (int j = 0; j < 5; ++j) {
      double work = 0, handoff = 0;
      for (int l = 0; l < L; ++l) {
        const size_t k = size_t(1 + 5 * l + j);
        work += double(t[size_t(B) + 2 * k]), handoff += double(t[size_t(B) + 2 * k + 1]);
      }
      const double per = 1e-3 / launches / double(L);
      out += fmt::format("; {} {:.2f} + {:.2f} a layer", kKinds[j], work * per, handoff * per);
    }
    spdlog::info("{} (work + hand-off)", out);
  }

  DecodeStepModel m_;
  Tensor inv_freq_, layers_, partials_, counters_, barrier_, trace_;
  int max_tokens_, grid_;
  SmemPlans smem_;
  cudaStream_t stream_;
};

// Why `m` is outside the kernel, or "".
std::string unsupported(const DecodeStepModel& m, const Backend& be) {
  if (be.compute_dtype() != DType::BF16) return "the kernel computes in bfloat16 only";
  if (!cuda::persistent_shapes_supported(m.hidden_size, m.intermediate_size, m.num_heads, m.num_kv_heads, m.head_dim))
    return fmt::format("shapes outside the kernel (head dim {}, {} query heads per kv head)", m.head_dim,
                       m.num_kv_heads > 0 ? m.num_heads / m.num_kv_heads : 0);
  for (const DecodeStepLayer& l : m.layers)
    for (const Tensor* t : {&l.qkv, &l.o_proj, &l.gate_up, &l.down, &l.kv.k, &l.kv.v})
      if (!t->defined() || t->dtype() != DType::BF16) return "weights or KV cache not in bfloat16";
  if (m.layers.empty()) return "no layers";
  if (m.layers[0].kv.k.dim(0) * int64_t(m.layers[0].kv.k.dim(1)) > int64_t(INT32_MAX))
    return "a KV cache of more than 2^31 slots";
  return "";
}

}  // namespace

std::unique_ptr<DecodeStep> make_decode_step(const DecodeStepModel& m, const Tensor& inv_freq,
                                             const DecodeKernelOptions& options, Backend& backend, cudaStream_t stream,
                                             std::string* why) {
  auto refuse = [&](std::string reason) -> std::unique_ptr<DecodeStep> {
    if (why) *why = std::move(reason);
    return nullptr;
  };
  if (options.persistent_max_tokens <= 0) return refuse("off (persistent_max_tokens 0)");
  if (std::string r = unsupported(m, backend); !r.empty()) return refuse(r);
  const int sms = cuda_current_sm_count(0);
  GS_CHECK(sms > 0, "the persistent decode kernel: the GPU's SM count cannot be queried");
  // The most rows whose instantiation fits an SM (every CTA must be resident) with a ring of at
  // least two stages, and each instantiation's shared memory.
  int device = 0, optin = 0;
  GS_CUDA_CHECK(cudaGetDevice(&device));
  GS_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  int max_tokens = 0;
  SmemPlans smem{};
  for (int M : kRowCounts) {
    if (M > rows_for(std::min(options.persistent_max_tokens, kPersistentMaxTokens))) break;
    int blocks = 0;
    const cuda::PersistentSmem s = cuda::persistent_smem(M, m.hidden_size, m.intermediate_size, m.num_heads,
                                                         m.num_kv_heads, m.head_dim, sms, size_t(optin));
    if (s.stages < 2 || cuda::persistent_decode_prepare(M, m.head_dim, s.bytes, &blocks) != cudaSuccess || blocks < 1) {
      cudaGetLastError();  // a refused shared-memory size is not sticky
      break;
    }
    smem[size_t(M)] = s;
    max_tokens = std::min(M, options.persistent_max_tokens);
  }
  if (max_tokens == 0) return refuse("the kernel's shared memory does not fit an SM for this model");
  return std::make_unique<CudaDecodeStep>(m, inv_freq, max_tokens, sms, smem, backend, stream, options.trace_phases);
}

}  // namespace gs::cuda_backend
