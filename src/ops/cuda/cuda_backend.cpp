// Implements ops/cuda/cuda_backend.h.
#include "ops/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>
#include <vector>

#include "core/cuda/cuda_allocator.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_device.h"
#include "core/cuda/cuda_stream.h"
#include "ops/cuda/cuda_decode_step.h"
#include "ops/cuda/cuda_lora_ops.h"
#include "ops/cuda/cuda_moe_ops.h"
#include "ops/cuda/fp8_linear.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/lt_gemm.h"
#include "ops/cuda/shard_kernels.h"
#include "ops/cuda/skinny_gemm.h"
#include "ops/fp8_weights.h"
#include "ops/lora_shape.h"

namespace gs {

namespace {

using cuda::bf16_t;

using cuda_backend::need;
using cuda_backend::need_rows;
using cuda_backend::ptr;
bool is_float(DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16; }

using RopeKey = std::tuple<float, int, float, float, float, int, int, std::vector<float>, std::vector<float>, float,
                           float, float, int, bool>;

cudaMemcpyKind copy_kind(const Tensor& dst, const Tensor& src) {
  if (src.device().is_cpu()) return dst.device().is_cpu() ? cudaMemcpyHostToHost : cudaMemcpyHostToDevice;
  return dst.device().is_cpu() ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, DType dtype, const KernelOptions& options)
      : device_(device),
        dtype_(dtype),
        linear_(options.linear),
        moe_(options.moe),
        decode_(options.decode),
        alloc_(device),
        stream_(device, &alloc_),
        gemm_(alloc_),
        lora_(device, dtype, options.lora),
        fp8_(alloc_, options.fp8) {}

  Device device() const override { return Device::cuda(device_); }
  std::string name() const override { return "cuda"; }
  DType compute_dtype() const override { return dtype_; }
  Allocator& allocator() override { return alloc_; }
  Stream& stream() override {
    ++enqueued_;  // whoever takes the stream may enqueue on it (expire_handoff)
    return stream_;
  }

  void copy(const Tensor& dst, const Tensor& src) override {
    GS_CHECK(dst.dtype() == src.dtype() && dst.numel() == src.numel(), "copy: {} and {} differ in dtype or size",
             dst.str(), src.str());
    if (dst.nbytes() == 0) return;
    GS_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), dst.nbytes(), copy_kind(dst, src), s()));
  }

  void copy_leading_columns(const Tensor& dst, const Tensor& src) override {
    check_leading_columns(dst, src);
    const int64_t rows = src.dim(0);
    if (rows == 0 || src.nbytes() == 0) return;
    const size_t row = src.nbytes() / size_t(rows), pitch = dst.nbytes() / size_t(rows);
    GS_CUDA_CHECK(cudaMemcpy2DAsync(dst.data(), pitch, src.data(), row, row, size_t(rows), copy_kind(dst, src), s()));
  }

  Tensor upload(const void* host, DType host_dtype, const Shape& shape, DType dtype) override {
    Tensor t = Tensor::empty(shape, dtype, alloc_);
    const size_t n = size_t(t.numel());
    std::vector<uint8_t> buf(t.nbytes());
    if (is_float(host_dtype) && is_float(dtype)) {
      convert_host(host, host_dtype, buf.data(), dtype, n);
    } else {
      GS_CHECK(host_dtype == dtype, "upload: cannot convert {} to {}", dtype_name(host_dtype), dtype_name(dtype));
      if (n) std::memcpy(buf.data(), host, buf.size());
    }
    if (!buf.empty()) {
      GS_CUDA_CHECK(cudaMemcpyAsync(t.data(), buf.data(), buf.size(), cudaMemcpyHostToDevice, s()));
      stream_.synchronize();  // buf dies here
    }
    return t;
  }

  void fill_zero(const Tensor& t) override {
    GS_CHECK(t.device().is_cuda(), "fill_zero: {} is not on the GPU", t.str());
    if (t.nbytes()) GS_CUDA_CHECK(cudaMemsetAsync(t.data(), 0, t.nbytes(), s()));
  }

  void fill_dummy(const Tensor& dst, const DummyFill& f) override {
    GS_CHECK(dst.device().is_cuda() && (dst.dtype() == DType::F32 || dst.dtype() == DType::BF16),
             "fill_dummy: {} is not an f32 or bf16 tensor on the GPU", dst.str());
    GS_CUDA_CHECK(cuda::fill_dummy(dst.data(), dst.dtype(), dst.numel(), f, s()));
  }

  void embedding(const Tensor& ids, const Tensor& table, const Tensor& out) override {
    embedding_rows(ids, table, out, "embedding", [&](auto id, auto tb, auto o, int T, int V, int H) {
      return cuda::embedding(id, tb, o, T, V, H, s());
    });
  }

  void embedding_shard(const Tensor& ids, const Tensor& table, int64_t first, const Tensor& out) override {
    embedding_rows(ids, table, out, "embedding_shard", [&](auto id, auto tb, auto o, int T, int V, int H) {
      return cuda::embedding_shard(id, tb, first, o, T, V, H, s());
    });
  }

  // embedding and embedding_shard: the same checks and dtype dispatch, then `kernel(ids, table,
  // out, T, V, H)` on typed pointers (out in f32 or the compute dtype).
  template <typename Kernel>
  void embedding_rows(const Tensor& ids, const Tensor& table, const Tensor& out, const char* op, Kernel&& kernel) {
    need(ids, DType::I32, op, "ids");
    need(table, dtype_, op, "table");
    need(out, residual_dtype(out), op, "out");
    const int64_t T = ids.numel(), H = table.row_elems();
    need_rows(out, T, H, op, "out");
    const int t = int(T), v = int(table.dim(0)), h = int(H);
    by_dtype([&](auto e) {
      using E = decltype(e);
      if (out.dtype() == DType::F32)
        GS_CUDA_CHECK(kernel(ptr<int32_t>(ids), ptr<E>(table), ptr<float>(out), t, v, h));
      else
        GS_CUDA_CHECK(kernel(ptr<int32_t>(ids), ptr<E>(table), ptr<E>(out), t, v, h));
    });
  }

  void rms_norm(const Tensor& x, const Tensor& w, float eps, const Tensor& out) override {
    const int64_t H = check_norm(x, w, out, "rms_norm", true);
    by_dtype([&](auto e) {
      using E = decltype(e);
      if (x.dtype() == DType::F32)
        GS_CUDA_CHECK(
            (cuda::rms_norm<E, float>(ptr<float>(x), ptr<E>(w), eps, ptr<E>(out), int(x.dim(0)), int(H), s())));
      else
        GS_CUDA_CHECK((cuda::rms_norm<E, E>(ptr<E>(x), ptr<E>(w), eps, ptr<E>(out), int(x.dim(0)), int(H), s())));
    });
  }

  void add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& w, float eps, const Tensor& out) override {
    add_rms_norm(residual, x, w, eps, out, {});
  }

  void linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y) override {
    expire_handoff();
    if (w.dtype() == DType::F8E4M3)
      return fp8_.linear(x, w, bias, y, s(), [&](const Tensor& wb) { linear(x, wb, bias, y); });
    need(x, dtype_, "linear", "x");
    need(w, dtype_, "linear", "w");
    GS_CHECK(y.defined() && y.device().is_cuda() && (y.dtype() == dtype_ || y.dtype() == DType::F32),
             "linear: y must be {} or f32 on the GPU, got {}", dtype_name(dtype_), y.str());
    const int64_t M = x.ndim() >= 1 ? x.dim(0) : 0, K = x.row_elems(), N = w.dim(0);
    GS_CHECK(w.row_elems() == K, "linear: w {} must be [N, {}] for x {}", w.str(), K, x.str());
    need_rows(y, M, N, "linear", "y");
    if (bias.defined()) {
      need(bias, dtype_, "linear", "bias");
      GS_CHECK(bias.numel() == N, "linear: bias {} must have {} elements", bias.str(), N);
    }
    const bool f32 = y.dtype() == DType::F32;
    if (M == 0 || N == 0) return;
    by_dtype([&](auto e) {
      using E = decltype(e);
      const E* b = bias.defined() ? ptr<E>(bias) : nullptr;
      if (K == 0) {
        fill_zero(y);
      } else if (cuda::gemv_supported(int(M), int(K), int(sizeof(E)), x.data(), w.data())) {
        GS_CUDA_CHECK(cuda::gemv<E>(ptr<E>(x), ptr<E>(w), b, y.data(), f32, int(M), int(N), int(K), s()));
        return;
      } else if (skinny(M, N, K, x, w)) {
        GS_CUDA_CHECK(cuda::skinny_gemm(ptr<bf16_t>(x), ptr<bf16_t>(w), bias.defined() ? ptr<bf16_t>(bias) : nullptr,
                                        y.data(), f32, int(M), int(N), int(K), s()));
        return;
      } else {
        gemm_.matmul(x.data(), w.data(), y.data(), dtype_ == DType::F32, f32, int(M), int(N), int(K), s());
      }
      if (b) GS_CUDA_CHECK(cuda::add_bias<E>(y.data(), f32, b, int(M), int(N), s()));
    });
  }

  void moe_route(const Tensor& logits, const Tensor& bias, const MoeRouting& r, const Tensor& ids,
                 const Tensor& weights) override {
    cuda_backend::moe_route(logits, bias, r, ids, weights, s());
  }
  // The experts, then (a.then) the residual add and the next layer's input norm: at one token on
  // hidden sizes in the norm handoff's window, by the small-batch path's fold, which hands the
  // norm to the QKV projection enqueued next (as linear_add_rms_norm does); else add_rms_norm, and
  // that projection reads its normed row as x.
  void moe_experts(const MoeExpertsArgs& a) override {
    const AddRmsNorm* then = a.then ? &*a.then : nullptr;
    const bool hand = cuda_backend::moe_experts(a, dtype_, moe_, gemm_, s(), then && moe_handoff_fits(a, *then));
    if (!then) return;
    if (!hand) add_rms_norm(then->residual, a.out, then->weight, then->eps, then->out);
    norm_handoff_ =
        NormHandoff{then->residual.data(), then->weight.data(), then->out.data(), then->eps, enqueued_, !hand};
  }
  std::string moe_kernels() const override { return cuda_backend::moe_kernels(moe_); }
  int64_t moe_workspace_bytes(int64_t T, int64_t k, int64_t E, int64_t I, int64_t H, int64_t routed) const override {
    return cuda_backend::moe_workspace_bytes(moe_, dtype_, T, k, E, I, H, routed);
  }
  std::unique_ptr<DecodeStep> make_decode_step(const DecodeStepModel& m, std::string* why) override {
    return cuda_backend::make_decode_step(m, inv_freq(m.rope), decode_, *this, s(), why);
  }

  GemmTuningReport tune_gemms(const GemmTuningOptions& opts) override {
    GS_CHECK(!stream_.capturing(), "tune_gemms: GEMMs cannot be timed inside a graph capture");
    const int elem = int(dtype_size(dtype_));
    return merge(gemm_.tune(
                     opts, std::string(dtype_name(dtype_)),
                     [this, elem](int M, int N, int K, const void* x, const void* w) {
                       return cuda::gemv_supported(M, K, elem, x, w) ||
                              (dtype_ == DType::BF16 && cuda::skinny_supported(M, N, K, x, w));
                     },
                     s()),
                 fp8_.tune_gemms(opts, s()));
  }

  // split_qkv_rope's checks (op names the caller); returns the token count.
  int64_t check_split_qkv_rope(const char* op, const Tensor& qkv, const Tensor& positions, const RopeConfig& cfg,
                               const Tensor& q_norm, const Tensor& k_norm, const Tensor& q, const Tensor& k,
                               const Tensor& v) {
    for (auto [t, n] : {std::pair{&qkv, "qkv"}, {&q, "q"}, {&k, "k"}, {&v, "v"}}) need(*t, dtype_, op, n);
    need(positions, DType::I32, op, "positions");
    const int D = cfg.head_dim;
    const int64_t T = positions.numel();
    GS_CHECK(D > 0 && D % 2 == 0 && D <= 256, "{}: head_dim must be even and in [2, 256], got {}", op, D);
    GS_CHECK(q.ndim() >= 1 && q.dim(0) == T && q.row_elems() % D == 0 && k.row_elems() % D == 0,
             "{}: q {} and k {} must be [{}, heads * {}]", op, q.str(), k.str(), T, D);
    need_rows(k, T, k.row_elems(), op, "k");
    need_rows(v, T, k.row_elems(), op, "v");
    need_rows(qkv, T, q.row_elems() + 2 * k.row_elems(), op, "qkv");
    GS_CHECK(q_norm.defined() == k_norm.defined(), "{}: give both q_norm and k_norm or neither", op);
    if (q_norm.defined()) {
      need(q_norm, dtype_, op, "q_norm");
      need(k_norm, dtype_, op, "k_norm");
      GS_CHECK(q_norm.numel() == D && k_norm.numel() == D, "{}: q_norm {} / k_norm {} must have {} elements", op,
               q_norm.str(), k_norm.str(), D);
    }
    return T;
  }

  void split_qkv_rope(const Tensor& qkv, const Tensor& positions, const RopeConfig& cfg, const Tensor& q_norm,
                      const Tensor& k_norm, float eps, const Tensor& q, const Tensor& k, const Tensor& v) override {
    split_qkv_rope(qkv, positions, cfg, q_norm, k_norm, eps, q, k, v, {});
  }

  void gated_activation(GatedActivation act, const Tensor& gate_up, const Tensor& out) override {
    gated_activation(act, gate_up, out, {});
  }

  // The deferred norm at one token (unless LinearKernelOptions::norm_fusion is off): o_proj / down add
  // into the f32 residual in the GEMV's epilogue, and the QKV / gate-up GEMV that follows computes
  // the norm of the residual row while it streams its weights (GemvInput).
  bool defers_norm(int64_t tokens) const override {
    return linear_.decode_fusion && linear_.norm_fusion && tokens == 1;
  }

  // The experts' fold hands the next QKV projection its norm (moe_experts) where the dense
  // models' residual add does (LinearKernelOptions::norm_handoff_min_k / max_k), in bf16.
  bool moe_norm_handoff(int64_t tokens, int64_t hidden) const override {
    return dtype_ == DType::BF16 && defers_norm(tokens) && hidden >= linear_.norm_handoff_min_k &&
           hidden <= linear_.norm_handoff_max_k;
  }
  // The QKV projections that read the handoff: the GEMVs on weights in the compute dtype, and on
  // FP8 weights at one token the head-norm GEMV (Fp8Linear::head_norm_gemv_at_one_token).
  bool reads_norm_handoff(const Tensor& qkv_w, int64_t tokens, int head_norm_dim) const override {
    if (qkv_w.dtype() == dtype_) return true;
    return qkv_w.dtype() == DType::F8E4M3 && tokens == 1 && head_norm_dim > 0 &&
           fp8_.head_norm_gemv_at_one_token(qkv_w, head_norm_dim);
  }

  using Backend::linear;
  // One projection with its epilogue (ops/linear_op.h): the fused GEMV / skinny-GEMM forms below
  // where they apply (each falls back to the unfused ops), else Backend's sequence.
  void linear(const LinearOp& op) override {
    expire_handoff();
    if (const auto* a = std::get_if<AddRmsNorm>(&op.then); a && a->peer_sum) return linear_peer_sum(op, *a);
    if (op.norm && op.norm->keep_x) return linear_keeping_norm(op);
    if (op.w.dtype() == DType::F8E4M3) return fp8_linear(op);
    const bool no_bias = !op.bias.defined();
    if (const auto* e = std::get_if<SplitQkvRope>(&op.then); e && e->rope && (!op.norm || op.norm->eps == e->eps)) {
      if (op.norm)
        rms_norm_linear_split_qkv_rope(op.norm->residual, op.norm->weight, op.norm->eps, op.x, op.w, op.bias,
                                       e->positions, *e->rope, e->q_norm, e->k_norm, op.y, e->q, e->k, e->v);
      else
        linear_split_qkv_rope(op.x, op.w, op.bias, e->positions, *e->rope, e->q_norm, e->k_norm, e->eps, op.y, e->q,
                              e->k, e->v);
      return;
    }
    if (const auto* g = std::get_if<Gated>(&op.then); g && no_bias) {
      if (op.norm)
        rms_norm_linear_gated_activation(op.norm->residual, op.norm->weight, op.norm->eps, op.x, g->act, op.w, op.y,
                                         g->out);
      else
        linear_gated_activation(g->act, op.x, op.w, op.y, g->out);
      return;
    }
    if (const auto* a = std::get_if<AddRmsNorm>(&op.then); a && no_bias && !op.norm) {
      linear_add_rms_norm(op.x, op.w, op.y, a->residual, a->weight, a->eps, a->out, a->next_reads_x);
      return;
    }
    Backend::linear(op);
  }

  // FP8 weights where the compute dtype is bf16 (ops/cuda/fp8_linear.h); an f32 backend keeps
  // their dequantization in f32 (the host reference quantization).
  bool fp8_weights() const override { return dtype_ == DType::BF16; }
  std::string fp8_kernels() const override { return fp8_weights() ? fp8_.describe() : Backend::fp8_kernels(); }
  void quantize_fp8(const Tensor& src, int64_t group_rows, bool block128, const Tensor& dst) override {
    need(src, DType::F32, "quantize_fp8", "src");
    if (dst.dtype() == DType::F8E4M3) return fp8_.quantize(src, group_rows, block128, dst, s());
    GS_CHECK(dst.shape() == src.shape() && src.ndim() == 2, "quantize_fp8: dst {} must have src's shape {}", dst.str(),
             src.str());
    std::vector<float> h(size_t(src.numel()));
    copy(Tensor::wrap(h.data(), src.shape(), DType::F32, Device::cpu()), src);
    stream_.synchronize();
    fp8_quantize_host(h.data(), src.dim(0), src.dim(1), group_rows, block128, nullptr, nullptr, h.data());
    copy(dst, upload(h.data(), DType::F32, src.shape(), dst.dtype()));
    stream_.synchronize();
  }

  void scale(const Tensor& x, float alpha) override { scale_softcap(x, alpha, 0.0f, "scale"); }

  void softcap(const Tensor& x, float cap) override {
    GS_CHECK(cap > 0, "softcap: cap must be positive, got {}", cap);
    scale_softcap(x, 1.0f, cap, "softcap");
  }

  void gather_rows(const Tensor& x, const Tensor& idx, const Tensor& out) override {
    need(idx, DType::I32, "gather_rows", "idx");
    need(out, x.dtype(), "gather_rows", "out");
    GS_CHECK(x.device().is_cuda() && dtype_size(x.dtype()) % 2 == 0,
             "gather_rows: x {} must be on the GPU with a dtype of 2 or more bytes", x.str());
    need_rows(out, idx.numel(), x.row_elems(), "gather_rows", "out");
    GS_CUDA_CHECK(cuda::gather_rows(x.data(), ptr<int32_t>(idx), out.data(), int(idx.numel()), int(x.dim(0)),
                                    x.row_elems() * int64_t(dtype_size(x.dtype())), s()));
  }

  // The LoRA ops (ops/cuda/cuda_lora_ops.h); the fused ones check the consuming op's own
  // arguments here and fall back to Backend's expand + plain op where no fused kernel applies.
  bool lora_stacked(const LoraFusedShape& shape) const override { return lora_.stacked(shape); }
  void lora_shrink(const Tensor& x, const Tensor& a, const Tensor& slots, const Tensor& tmp) override {
    lora_.shrink(x, a, slots, tmp, s());
  }
  void lora_expand(const Tensor& tmp, const Tensor& bt, const Tensor& slots, const Tensor& y,
                   const LoraParts& parts) override {
    lora_.expand(tmp, bt, slots, y, parts, s());
  }
  using Backend::lora_expand;
  void lora_expand(const Tensor& tmp, const Tensor& bt, const Tensor& slots, const Tensor& y, const LoraParts& parts,
                   const LinearEpilogue& then) override {
    if (const auto* e = std::get_if<SplitQkvRope>(&then); e && e->rope)
      return lora_expand_split_qkv_rope(tmp, bt, slots, parts, y, e->positions, *e->rope, e->q_norm, e->k_norm, e->eps,
                                        e->q, e->k, e->v);
    if (const auto* g = std::get_if<Gated>(&then))
      return lora_expand_gated_activation(g->act, tmp, bt, slots, y, parts, g->out);
    if (const auto* a = std::get_if<AddRmsNorm>(&then))
      return lora_expand_add_rms_norm(tmp, bt, slots, a->residual, y, a->weight, a->eps, a->out);
    Backend::lora_expand(tmp, bt, slots, y, parts, then);
  }

 private:
  // Every op enqueues through s(), which counts the calls: Fp8Linear's handoff (an op's output
  // quantized for the next projection) holds only while nothing else was enqueued after the op
  // that stored it.
  cudaStream_t s() const {
    ++enqueued_;
    return stream_.handle();
  }
  void hand_off(const Tensor& x) {
    fp8_.hand_off(x);
    handoff_at_ = enqueued_;
  }
  void expire_handoff() {
    if (enqueued_ != handoff_at_) fp8_.drop_handoff();
  }
  // The norm handoff: the one-token residual add (linear_add_rms_norm) that stored
  // xn = residual * norm_w for the projection enqueued right after it, which takes it where its
  // norm is that one (the same residual, weight, eps and x).
  // normed: xn already holds rms_norm(residual) * norm_w (moe_experts' add_rms_norm), read as x.
  struct NormHandoff {
    const void *residual = nullptr, *norm_w = nullptr, *xn = nullptr;
    float eps = 0.0f;
    uint64_t at = 0;  // enqueued_ after the add
    bool normed = false;
  };
  template <typename E>
  cuda::GemvInput<E> normed_input(const Tensor& residual, const Tensor& norm_w, float eps, const Tensor& x) const {
    const NormHandoff& h = norm_handoff_;
    if (h.xn && h.at == enqueued_ && h.residual == residual.data() && h.norm_w == norm_w.data() && h.eps == eps &&
        x.defined() && h.xn == x.data())
      return h.normed ? cuda::GemvInput<E>(ptr<E>(x))
                      : cuda::GemvInput<E>::handoff(ptr<E>(x), ptr<float>(residual), ptr<E>(norm_w), eps);
    return cuda::GemvInput<E>(ptr<float>(residual), ptr<E>(norm_w), eps);
  }
  // Whether the experts' fold may take `then` as a norm handoff (moe_experts): moe_norm_handoff,
  // then's tensors on the GPU in the shapes it writes, aligned for the GEMV that reads them.
  bool moe_handoff_fits(const MoeExpertsArgs& a, const AddRmsNorm& then) const {
    const int64_t H = a.out.row_elems();
    const auto row = [&](const Tensor& t, DType d) {
      return t.defined() && t.dtype() == d && t.device().is_cuda() && t.dim(0) == 1 && t.row_elems() == H;
    };
    return a.x.dim(0) == 1 && moe_norm_handoff(1, H) && row(then.residual, DType::F32) && row(then.out, dtype_) &&
           then.weight.dtype() == dtype_ && then.weight.numel() == H &&
           cuda::gemv_supported(1, int(H), int(dtype_size(dtype_)), then.out.data(), then.weight.data());
  }

  // The row-wise ops above, reading their input (x, gate_up, qkv) through the FP8 GEMM's scales
  // where sc.row is set (cuda::OutputScales).
  void add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& w, float eps, const Tensor& out,
                    const cuda::OutputScales& sc, const cuda::QuantizedOut& qo = {}) {
    const int64_t H = check_norm(x, w, out, "add_rms_norm");
    need(residual, residual_dtype(residual), "add_rms_norm", "residual");
    need_rows(residual, x.dim(0), H, "add_rms_norm", "residual");
    by_dtype([&](auto e) {
      using E = decltype(e);
      if (residual.dtype() == DType::F32)
        GS_CUDA_CHECK((cuda::add_rms_norm<E, float>(ptr<float>(residual), ptr<E>(x), ptr<E>(w), eps, ptr<E>(out),
                                                    int(x.dim(0)), int(H), s(), sc, qo)));
      else
        GS_CUDA_CHECK((cuda::add_rms_norm<E, E>(ptr<E>(residual), ptr<E>(x), ptr<E>(w), eps, ptr<E>(out), int(x.dim(0)),
                                                int(H), s(), sc, qo)));
    });
  }
  void gated_activation(GatedActivation act, const Tensor& gate_up, const Tensor& out, const cuda::OutputScales& sc,
                        const cuda::QuantizedOut& qo = {}) {
    need(gate_up, dtype_, "gated_activation", "gate_up");
    need(out, dtype_, "gated_activation", "out");
    const int64_t T = out.ndim() >= 1 ? out.dim(0) : 0, I = out.row_elems();
    need_rows(gate_up, T, 2 * I, "gated_activation", "gate_up");
    by_dtype([&](auto e) {
      using E = decltype(e);
      GS_CUDA_CHECK(cuda::gated_activation<E>(act, ptr<E>(gate_up), ptr<E>(out), int(T), int(I), s(), sc, qo));
    });
  }
  void split_qkv_rope(const Tensor& qkv, const Tensor& positions, const RopeConfig& cfg, const Tensor& q_norm,
                      const Tensor& k_norm, float eps, const Tensor& q, const Tensor& k, const Tensor& v,
                      const cuda::OutputScales& sc) {
    const int64_t T = check_split_qkv_rope("split_qkv_rope", qkv, positions, cfg, q_norm, k_norm, q, k, v);
    const int D = cfg.head_dim;
    const Tensor& inv = inv_freq(cfg);
    by_dtype([&](auto e) {
      using E = decltype(e);
      const E* qn = q_norm.defined() ? ptr<E>(q_norm) : nullptr;
      const E* kn = k_norm.defined() ? ptr<E>(k_norm) : nullptr;
      GS_CUDA_CHECK(cuda::split_qkv_rope<E>(ptr<E>(qkv), ptr<int32_t>(positions), ptr<float>(inv), qn, kn, eps,
                                            ptr<E>(q), ptr<E>(k), ptr<E>(v), int(T), int(q.row_elems() / D),
                                            int(k.row_elems() / D), D, cfg.long_from, s(), sc));
    });
  }

  // Above the skinny kernel (Fp8Linear::scales_in_epilogue): cuBLASLt's unscaled FP8 product, read
  // chunk by chunk through its scales and bias by the epilogue's own op (one pass over y fewer than
  // the scale pass + op). The gated activation and the add + norm also store their output quantized
  // for the next projection where Fp8Linear has room (its handoff). False where the op has no
  // epilogue, a norm before it, or the path is another.
  bool fp8_scaled_epilogue(const LinearOp& op) {
    if (op.norm || std::holds_alternative<std::monostate>(op.then) || !fp8_.scales_in_epilogue(op.x, op.w, op.y))
      return false;
    if (const auto* e = std::get_if<SplitQkvRope>(&op.then); e && e->rope) {
      check_split_qkv_rope("linear", op.y, e->positions, *e->rope, e->q_norm, e->k_norm, e->q, e->k, e->v);
      fp8_.linear_unscaled(op.x, op.w, op.bias, op.y, s(), [&](int m0, int m, const cuda::OutputScales& sc) {
        split_qkv_rope(op.y.rows(m0, m), e->positions.rows(m0, m), *e->rope, e->q_norm, e->k_norm, e->eps,
                       e->q.rows(m0, m), e->k.rows(m0, m), e->v.rows(m0, m), sc);
      });
      return true;
    }
    if (const auto* g = std::get_if<Gated>(&op.then)) {
      const int64_t rows = g->out.dim(0);
      const cuda::QuantizedOut qo = rows >= Fp8Linear::kGatedHandoffMinTokens
                                        ? fp8_.handoff_scratch(rows, g->out.row_elems())
                                        : cuda::QuantizedOut{};
      fp8_.linear_unscaled(op.x, op.w, op.bias, op.y, s(), [&](int m0, int m, const cuda::OutputScales& sc) {
        gated_activation(g->act, op.y.rows(m0, m), g->out.rows(m0, m), sc, qo);
      });
      if (qo.q) hand_off(g->out);
      return true;
    }
    if (const auto* a = std::get_if<AddRmsNorm>(&op.then)) {
      const cuda::QuantizedOut qo = fp8_.handoff_scratch(a->out.dim(0), a->out.row_elems());
      fp8_.linear_unscaled(op.x, op.w, op.bias, op.y, s(), [&](int m0, int m, const cuda::OutputScales& sc) {
        add_rms_norm(a->residual.rows(m0, m), op.y.rows(m0, m), a->weight, a->eps, a->out.rows(m0, m), sc, qo);
      });
      if (qo.q) hand_off(a->out);
      return true;
    }
    return false;
  }

  // A LinearOp on FP8 weights: where the skinny FP8 kernel takes the batch (Fp8Linear::fuses), the
  // epilogue fused into it (the RoPE split, with Qwen3's q/k norm too, the gated activation, the
  // deferred norm's residual add) and, for the deferred norm, the norm before it too (else its own
  // kernel; with an epilogue the kernel does not take, the norm still in the kernel, the epilogue
  // after);
  // on cuBLASLt's path the scales in the epilogue's op (fp8_scaled_epilogue); otherwise Backend's
  // sequence.
  void fp8_linear(const LinearOp& op) {
    if (fp8_scaled_epilogue(op)) return;
    if (!linear_.decode_fusion || !fp8_.fuses(op.x, op.w)) return Backend::linear(op);
    const int64_t M = op.x.dim(0), K = op.x.row_elems(), N = op.w.dim(0);
    const RmsNormInput* norm = op.norm && defers_norm(M) && fp8_.fuses_norm(*op.norm, op.x, op.w) ? &*op.norm : nullptr;
    if (op.norm && !norm) rms_norm(op.norm->residual, op.norm->weight, op.norm->eps, op.x);
    if (const auto* e = std::get_if<SplitQkvRope>(&op.then);
        e && e->rope && (!e->q_norm.defined() || fp8_head_norm_fits(op.x, norm, op.w, *e)) &&
        qkv_rope_gemv_fits(op.w, op.bias, e->positions, *e->rope, e->q, e->k, e->v, M, K)) {
      // The head-norm GEMV reads a norm handoff where the experts left one (checked before s() counts the launch).
      const cuda::GemvInput<bf16_t> in =
          norm ? normed_input<bf16_t>(norm->residual, norm->weight, norm->eps, op.x) : ptr<bf16_t>(op.x);
      fp8_.linear_qkv_rope(op.x, norm, op.w, op.bias, e->positions, inv_freq(*e->rope), e->rope->head_dim,
                           e->rope->long_from, e->q, e->k, e->v, s(), qk_norm_of<bf16_t>(e->q_norm, e->k_norm, e->eps),
                           &in);
      return;
    }
    if (const auto* g = std::get_if<Gated>(&op.then); g && !op.bias.defined()) {
      need(g->out, dtype_, "linear", "gated out");
      if (N == 2 * g->out.row_elems() && g->out.dim(0) == M)
        return fp8_.linear_gated(g->act, op.x, norm, op.w, g->out, s());
    }
    if (const auto* a = std::get_if<AddRmsNorm>(&op.then);
        a && !op.bias.defined() && defers_norm(M) && a->residual.dtype() == DType::F32 &&
        a->residual.device().is_cuda() && a->residual.dim(0) == M && a->residual.row_elems() == N)
      return fp8_.linear_add_residual(op.x, norm, op.w, a->residual, s());
    if (norm) {  // no fused epilogue took it: the projection alone, on the norm the kernel computes
      expire_handoff();
      need_rows(op.y, M, N, "linear", "y");
      fp8_.linear_normed(*norm, op.x, op.w, op.bias, op.y, s());
    } else {
      linear(op.x, op.w, op.bias, op.y);
    }
    apply_epilogue(op.y, op.then);
  }

  // The unfused forms of the fused projections below (their fallbacks).
  void unfused_split_qkv_rope(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& positions,
                              const RopeConfig& cfg, const Tensor& q_norm, const Tensor& k_norm, float eps,
                              const Tensor& qkv, const Tensor& q, const Tensor& k, const Tensor& v) {
    linear(x, w, bias, qkv);
    split_qkv_rope(qkv, positions, cfg, q_norm, k_norm, eps, q, k, v);
  }
  void unfused_gated_activation(GatedActivation act, const Tensor& x, const Tensor& w, const Tensor& gate_up,
                                const Tensor& out) {
    linear(x, w, Tensor(), gate_up);
    gated_activation(act, gate_up, out);
  }
  void unfused_add_rms_norm(const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& residual,
                            const Tensor& norm_w, float eps, const Tensor& out) {
    linear(x, w, Tensor(), y);
    add_rms_norm(residual, y, norm_w, eps, out);
  }

  // One GEMV (M = 1) or skinny GEMM (decode batches) with the RoPE epilogue without q/k norm;
  // linear then split_qkv_rope otherwise (and with LinearKernelOptions' decode_fusion or skinny_fusion off).
  void linear_split_qkv_rope(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& positions,
                             const RopeConfig& cfg, const Tensor& q_norm, const Tensor& k_norm, float eps,
                             const Tensor& qkv, const Tensor& q, const Tensor& k, const Tensor& v) {
    need(x, dtype_, "linear_split_qkv_rope", "x");
    const int64_t M = x.ndim() >= 1 ? x.dim(0) : 0, K = x.row_elems();
    const bool gemv = cuda::gemv_supported(int(M), int(K), int(dtype_size(dtype_)), x.data(), w.data());
    if (linear_.decode_fusion && (!q_norm.defined() || (gemv && qk_norm_fits(q_norm, k_norm, cfg))) &&
        qkv_rope_gemv_fits(w, bias, positions, cfg, q, k, v, M, K) &&
        (gemv || (linear_.skinny_fusion && skinny(M, w.dim(0), K, x, w)))) {
      qkv_rope_gemv(x, w, bias, positions, cfg, q_norm, k_norm, eps, q, k, v);
      return;
    }
    unfused_split_qkv_rope(x, w, bias, positions, cfg, q_norm, k_norm, eps, qkv, q, k, v);
  }

  // One gated GEMV (M = 1) or skinny GEMM (decode batches); linear then gated_activation otherwise
  // (and with LinearKernelOptions' decode_fusion or skinny_fusion off).
  void linear_gated_activation(GatedActivation act, const Tensor& x, const Tensor& w, const Tensor& gate_up,
                               const Tensor& out) {
    const char* op = "linear_gated_activation";
    need(x, dtype_, op, "x"), need(w, dtype_, op, "w"), need(out, dtype_, op, "out");
    const int64_t M = x.ndim() >= 1 ? x.dim(0) : 0, K = x.row_elems(), I = out.row_elems();
    const bool fits =
        linear_.decode_fusion && M > 0 && K > 0 && w.dim(0) == 2 * I && w.row_elems() == K && out.dim(0) == M;
    if (fits && linear_.skinny_fusion && skinny(M, w.dim(0), K, x, w)) {
      GS_CUDA_CHECK(
          cuda::skinny_gemm_gated(act, ptr<bf16_t>(x), ptr<bf16_t>(w), ptr<bf16_t>(out), int(M), int(I), int(K), s()));
      return;
    }
    if (fits && cuda::gemv_supported(int(M), int(K), int(dtype_size(dtype_)), x.data(), w.data())) {
      by_dtype([&](auto e) {
        using E = decltype(e);
        GS_CUDA_CHECK(cuda::gemv_gated<E>(act, ptr<E>(x), ptr<E>(w), ptr<E>(out), int(M), int(I), int(K), s()));
      });
      return;
    }
    unfused_gated_activation(act, x, w, gate_up, out);
  }

  // A norm whose row later ops read (RmsNormInput::keep_x; the router before the experts): at one
  // token a plain GEMV norms the residual as it streams and its blocks store the normed row, a
  // share each; otherwise the norm, then the projection of x.
  void linear_keeping_norm(const LinearOp& op) {
    const RmsNormInput& n = *op.norm;
    const int64_t N = op.w.dim(0);
    if (!gemv_keeps_norm(op)) {
      rms_norm(n.residual, n.weight, n.eps, op.x);
      LinearOp rest = op;
      rest.norm.reset();
      return linear(rest);
    }
    if (op.bias.defined()) need(op.bias, dtype_, "linear", "bias");
    by_dtype([&](auto e) {
      using E = decltype(e);
      const cuda::GemvInput<E> in(ptr<float>(n.residual), ptr<E>(n.weight), n.eps, ptr<E>(op.x));
      GS_CUDA_CHECK(cuda::gemv<E>(in, ptr<E>(op.w), op.bias.defined() ? ptr<E>(op.bias) : nullptr, op.y.data(),
                                  op.y.dtype() == DType::F32, 1, int(N), int(op.x.row_elems()), s()));
    });
  }

  // Whether the one-token GEMV takes linear_keeping_norm's op whole: no epilogue, weights in the
  // compute dtype, x [1, K] aligned for its stores, y [1, N] in the compute dtype or f32.
  bool gemv_keeps_norm(const LinearOp& op) const {
    const RmsNormInput& n = *op.norm;
    const int64_t N = op.w.dim(0), K = op.w.row_elems();
    const auto on_gpu = [](const Tensor& t, int64_t cols) {
      return t.defined() && t.device().is_cuda() && t.dim(0) == 1 && t.row_elems() == cols;
    };
    return std::holds_alternative<std::monostate>(op.then) && op.w.dtype() == dtype_ &&
           normed_gemv_fits(n.residual, n.weight, op.w, "linear") && on_gpu(op.x, K) && op.x.dtype() == dtype_ &&
           cuda::gemv_supported(1, int(K), int(dtype_size(dtype_)), op.x.data(), op.w.data()) && on_gpu(op.y, N) &&
           (op.y.dtype() == dtype_ || op.y.dtype() == DType::F32) && (!op.bias.defined() || op.bias.numel() == N);
  }

  void linear_add_rms_norm(const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& residual,
                           const Tensor& norm_w, float eps, const Tensor& out, bool next_reads_x) {
    const char* op = "linear_add_rms_norm";
    need(x, dtype_, op, "x"), need(w, dtype_, op, "w");
    const int64_t M = x.ndim() >= 1 ? x.dim(0) : 0, K = x.row_elems(), N = w.dim(0);
    if (defers_norm(M) && K > 0 && w.row_elems() == K && residual.defined() && residual.dtype() == DType::F32 &&
        residual.device().is_cuda() && residual.dim(0) == M && residual.row_elems() == N &&
        cuda::gemv_supported(int(M), int(K), int(dtype_size(dtype_)), x.data(), w.data())) {
      // The handoff's x goes to out, which the deferred norm leaves to the next projection.
      const bool hand = next_reads_x && N >= linear_.norm_handoff_min_k && N <= linear_.norm_handoff_max_k &&
                        out.defined() && out.data() != x.data() && out.dtype() == dtype_ && out.device().is_cuda() &&
                        out.dim(0) == 1 && out.row_elems() == N && norm_w.dtype() == dtype_ && norm_w.numel() == N &&
                        cuda::gemv_supported(1, int(N), int(dtype_size(dtype_)), out.data(), norm_w.data());
      by_dtype([&](auto e) {
        using E = decltype(e);
        GS_CUDA_CHECK(cuda::gemv_add_residual<E>(ptr<E>(x), ptr<E>(w), ptr<float>(residual), int(M), int(N), int(K),
                                                 s(), hand ? ptr<E>(norm_w) : nullptr, hand ? ptr<E>(out) : nullptr));
      });
      norm_handoff_ = hand ? NormHandoff{residual.data(), norm_w.data(), out.data(), eps, enqueued_} : NormHandoff{};
      return;
    }
    unfused_add_rms_norm(x, w, y, residual, norm_w, eps, out);
  }

  // The row-parallel projection at one token summing the ranks' partials itself (cuda::gemv_peer_sum).
  void linear_peer_sum(const LinearOp& op, const AddRmsNorm& a) {
    GS_CHECK(folds_peer_sum(op),
             "linear with the ranks' partial sums: x {}, w {}, y {}, residual {}, norm {}, out {} do not fit the "
             "one-token kernels (one row of the compute dtype, f32 residual, no bias or input norm, 16-byte aligned)",
             op.x.str(), op.w.str(), op.y.str(), a.residual.str(), a.weight.str(), a.out.str());
    norm_handoff_ = {};
    if (op.w.dtype() == DType::F8E4M3) return fp8_.linear_peer_sum(op.x, op.w, op.y, a, s());
    by_dtype([&](auto e) {
      using E = decltype(e);
      GS_CUDA_CHECK(cuda::gemv_peer_sum<E>(ptr<E>(op.x), ptr<E>(op.w), ptr<E>(op.y), ptr<float>(a.residual),
                                           ptr<E>(a.weight), a.eps, ptr<E>(a.out), int(op.w.dim(0)),
                                           int(op.x.row_elems()), *a.peer_sum, s()));
    });
  }

  void rms_norm_linear_split_qkv_rope(const Tensor& residual, const Tensor& norm_w, float eps, const Tensor& normed,
                                      const Tensor& w, const Tensor& bias, const Tensor& positions,
                                      const RopeConfig& cfg, const Tensor& q_norm, const Tensor& k_norm,
                                      const Tensor& qkv, const Tensor& q, const Tensor& k, const Tensor& v) {
    const int64_t M = residual.ndim() >= 1 ? residual.dim(0) : 0, K = residual.row_elems();
    const bool rope_fused = (!q_norm.defined() || qk_norm_fits(q_norm, k_norm, cfg)) &&
                            qkv_rope_gemv_fits(w, bias, positions, cfg, q, k, v, M, K);
    if (!normed_gemv_fits(residual, norm_w, w, "rms_norm_linear_split_qkv_rope") ||
        (!rope_fused && !(w.row_elems() == K && qkv.dim(0) == M && qkv.row_elems() == w.dim(0)))) {
      rms_norm(residual, norm_w, eps, normed);
      linear_split_qkv_rope(normed, w, bias, positions, cfg, q_norm, k_norm, eps, qkv, q, k, v);
      return;
    }
    need(qkv, dtype_, "rms_norm_linear_split_qkv_rope", "qkv");
    if (bias.defined()) need(bias, dtype_, "rms_norm_linear_split_qkv_rope", "bias");
    by_dtype([&](auto e) {
      using E = decltype(e);
      const E* b = bias.defined() ? ptr<E>(bias) : nullptr;
      const int D = cfg.head_dim;
      if (rope_fused) {
        const cuda::GemvInput<E> in = normed_input<E>(residual, norm_w, eps, normed);  // before s() counts the launch
        GS_CUDA_CHECK(cuda::gemv_qkv_rope<E>(in, ptr<E>(w), b, ptr<int32_t>(positions), ptr<float>(inv_freq(cfg)),
                                             ptr<E>(q), ptr<E>(k), ptr<E>(v), 1, int(q.row_elems() / D),
                                             int(k.row_elems() / D), D, int(K), cfg.long_from, s(),
                                             qk_norm_of<E>(q_norm, k_norm, eps), qkv_wide_max_blocks()));
      } else {  // a q/k norm the GEMV does not take: the normed projection into qkv, then split_qkv_rope
        const cuda::GemvInput<E> in = normed_input<E>(residual, norm_w, eps, normed);
        GS_CUDA_CHECK(cuda::gemv<E>(in, ptr<E>(w), b, qkv.data(), false, 1, int(w.dim(0)), int(K), s()));
        split_qkv_rope(qkv, positions, cfg, q_norm, k_norm, eps, q, k, v);
      }
    });
  }

  void rms_norm_linear_gated_activation(const Tensor& residual, const Tensor& norm_w, float eps, const Tensor& normed,
                                        GatedActivation act, const Tensor& w, const Tensor& gate_up,
                                        const Tensor& out) {
    const char* op = "rms_norm_linear_gated_activation";
    const int64_t K = residual.row_elems(), I = out.row_elems();
    if (!normed_gemv_fits(residual, norm_w, w, op) || w.dim(0) != 2 * I || out.dim(0) != 1) {
      rms_norm(residual, norm_w, eps, normed);
      linear_gated_activation(act, normed, w, gate_up, out);
      return;
    }
    need(out, dtype_, op, "out");
    by_dtype([&](auto e) {
      using E = decltype(e);
      const cuda::GemvInput<E> in = normed_input<E>(residual, norm_w, eps, normed);  // before s() counts the launch
      GS_CUDA_CHECK(cuda::gemv_gated<E>(act, in, ptr<E>(w), ptr<E>(out), 1, int(I), int(K), s()));
    });
  }

  void lora_expand_split_qkv_rope(const Tensor& tmp, const Tensor& bt, const Tensor& slots, const LoraParts& parts,
                                  const Tensor& qkv, const Tensor& positions, const RopeConfig& cfg,
                                  const Tensor& q_norm, const Tensor& k_norm, float eps, const Tensor& q,
                                  const Tensor& k, const Tensor& v) {
    const LoraShape l = check_lora_expand_or_stacked(tmp, bt, slots, qkv);
    check_split_qkv_rope("lora_expand_split_qkv_rope", lora_projection_shape(l, qkv, dtype_), positions, cfg, q_norm,
                         k_norm, q, k, v);
    GS_CHECK(tmp.defined() || !q_norm.defined(),
             "lora_expand_split_qkv_rope: the stacked shrink without q/k norm only");
    if (q_norm.defined() || !lora_.expand_split_qkv_rope(tmp, bt, slots, parts, qkv, positions, inv_freq(cfg),
                                                         cfg.head_dim, cfg.long_from, q, k, v, s()))
      Backend::lora_expand(tmp, bt, slots, qkv, parts, SplitQkvRope{positions, &cfg, q_norm, k_norm, eps, q, k, v});
  }
  void lora_expand_gated_activation(GatedActivation act, const Tensor& tmp, const Tensor& bt, const Tensor& slots,
                                    const Tensor& gate_up, const LoraParts& parts, const Tensor& out) {
    if (!lora_.expand_gated_activation(act, tmp, bt, slots, gate_up, parts, out, s()))
      Backend::lora_expand(tmp, bt, slots, gate_up, parts, Gated{act, out});
  }
  void lora_expand_add_rms_norm(const Tensor& tmp, const Tensor& bt, const Tensor& slots, const Tensor& residual,
                                const Tensor& x, const Tensor& w, float eps, const Tensor& out) {
    const char* op = "lora_expand_add_rms_norm";
    const int64_t H =
        check_norm(lora_projection_shape(check_lora_expand_or_stacked(tmp, bt, slots, x), x, dtype_), w, out, op);
    need(residual, residual_dtype(residual), op, "residual");
    need_rows(residual, x.dim(0), H, op, "residual");
    if (!lora_.expand_add_rms_norm(tmp, bt, slots, residual, x, w, eps, out, s()))
      Backend::lora_expand(tmp, bt, slots, x, LoraParts{}, AddRmsNorm{residual, w, eps, out});
  }

  void scale_softcap(const Tensor& x, float alpha, float cap, const char* op) {
    need(x, residual_dtype(x), op, "x");
    if (x.dtype() == DType::F32)
      GS_CUDA_CHECK(cuda::scale_softcap<float>(ptr<float>(x), x.numel(), alpha, cap, s()));
    else
      GS_CUDA_CHECK(cuda::scale_softcap<bf16_t>(ptr<bf16_t>(x), x.numel(), alpha, cap, s()));
  }

  // Calls f with a value of the compute dtype's element type (bf16_t or float).
  template <typename F>
  void by_dtype(F&& f) const {
    if (dtype_ == DType::F32)
      f(float{});
    else
      f(bf16_t{});
  }

  // The residual stream may be f32 whatever the compute dtype (see Backend::add_rms_norm).
  DType residual_dtype(const Tensor& t) const { return t.defined() && t.dtype() == DType::F32 ? DType::F32 : dtype_; }

  int64_t check_norm(const Tensor& x, const Tensor& w, const Tensor& out, const char* op,
                     bool x_may_be_residual = false) {
    need(x, x_may_be_residual ? residual_dtype(x) : dtype_, op, "x");
    need(w, dtype_, op, "w");
    need(out, dtype_, op, "out");
    GS_CHECK(x.ndim() >= 1, "{}: x must be [T, H], got {}", op, x.str());
    const int64_t H = x.row_elems();
    GS_CHECK(w.numel() == H, "{}: w {} must have {} elements", op, w.str(), H);
    need_rows(out, x.dim(0), H, op, "out");
    return H;
  }

  bool folds_peer_sum(const LinearOp& op) const override {
    const auto* a = std::get_if<AddRmsNorm>(&op.then);
    if (!a || op.norm || op.bias.defined()) return false;
    const auto one_row = [&](const Tensor& t, DType dt, int64_t n) {
      return t.defined() && t.dtype() == dt && t.device().is_cuda() && t.numel() == n &&
             reinterpret_cast<uintptr_t>(t.data()) % 16 == 0;
    };
    const int64_t K = op.x.defined() ? op.x.row_elems() : 0, N = op.w.defined() ? op.w.dim(0) : 0;
    if (op.x.ndim() != 2 || op.x.dim(0) != 1 || !one_row(op.x, dtype_, K) || !one_row(op.y, dtype_, N) ||
        !one_row(a->residual, DType::F32, N) || !one_row(a->weight, dtype_, N) || !one_row(a->out, dtype_, N))
      return false;
    if (op.w.dtype() == DType::F8E4M3)
      return fp8_weights() && linear_.decode_fusion && fp8_.fuses(op.x, op.w) &&
             cuda::fp8_skinny_peer_sum_supported(int(N));
    const int es = int(dtype_size(dtype_));
    return op.w.dtype() == dtype_ && op.w.row_elems() == K &&
           cuda::gemv_supported(1, int(K), es, op.x.data(), op.w.data()) &&
           cuda::gemv_peer_sum_supported(int(N), int(K), es);
  }

  // Whether a GEMV with the norm fused (GemvInput) takes the f32 residual [1, K], norm_w [K] and the
  // weight w [N, K] (one token, deferred norm on, aligned rows).
  bool normed_gemv_fits(const Tensor& residual, const Tensor& norm_w, const Tensor& w, const char* op) const {
    need(w, dtype_, op, "w"), need(norm_w, dtype_, op, "norm_w");
    const int64_t K = residual.defined() ? residual.row_elems() : 0;
    if (!residual.defined() || residual.dtype() != DType::F32 || !residual.device().is_cuda() || residual.dim(0) != 1 ||
        !defers_norm(1) || K == 0 || w.row_elems() != K || norm_w.numel() != K)
      return false;
    bool ok = false;
    by_dtype([&](auto e) {
      using E = decltype(e);
      ok =
          cuda::gemv_supported<E>(1, int(K), cuda::GemvInput<E>(ptr<float>(residual), ptr<E>(norm_w), 0.0f), ptr<E>(w));
    });
    return ok;
  }

  // Whether the QKV GEMV with the RoPE epilogue takes these shapes (M tokens of K inputs).
  bool qkv_rope_gemv_fits(const Tensor& w, const Tensor& bias, const Tensor& positions, const RopeConfig& cfg,
                          const Tensor& q, const Tensor& k, const Tensor& v, int64_t M, int64_t K) const {
    const char* op = "linear_split_qkv_rope";
    if (w.dtype() != DType::F8E4M3) need(w, dtype_, op, "w");
    need(positions, DType::I32, op, "positions");
    for (auto [t, n] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}}) need(*t, dtype_, op, n);
    if (bias.defined()) need(bias, dtype_, op, "bias");
    const int D = cfg.head_dim;
    const int64_t QW = q.row_elems(), KW = k.row_elems();
    return M > 0 && K > 0 && D > 0 && D % 2 == 0 && QW % D == 0 && KW % D == 0 && v.row_elems() == KW &&
           w.dim(0) == QW + 2 * KW && w.row_elems() == K && positions.numel() == M && q.dim(0) == M && k.dim(0) == M &&
           v.dim(0) == M && (!bias.defined() || bias.numel() == w.dim(0));
  }
  // The skinny tensor-core GEMM takes bf16 decode batches (ops/cuda/skinny_gemm.h says which).
  bool skinny(int64_t M, int64_t N, int64_t K, const Tensor& x, const Tensor& w) const {
    return dtype_ == DType::BF16 && cuda::skinny_supported(int(M), N, int(K), x.data(), w.data());
  }

  // Whether the QKV GEMV (fp8_skinny: the skinny kernel on FP8 rows) takes Qwen3's q/k norm (weights
  // [head_dim] in the compute dtype) at this head dim; LinearKernelOptions::qk_norm_fusion off:
  // never (the projection, then split_qkv_rope).
  bool qk_norm_fits(const Tensor& q_norm, const Tensor& k_norm, const RopeConfig& cfg, bool fp8_skinny = false) const {
    const int D = cfg.head_dim;
    return linear_.qk_norm_fusion &&
           (fp8_skinny ? cuda::skinny_qk_norm_supported(D) : cuda::gemv_qk_norm_supported(D)) && k_norm.defined() &&
           q_norm.numel() == cfg.head_dim && k_norm.numel() == cfg.head_dim && q_norm.dtype() == dtype_ &&
           k_norm.dtype() == dtype_;
  }
  // Whether Fp8Linear::linear_qkv_rope takes e's q / k norm on x (or rms_norm(*norm)) times w.
  bool fp8_head_norm_fits(const Tensor& x, const RmsNormInput* norm, const Tensor& w, const SplitQkvRope& e) const {
    const Fp8Linear::HeadNorm k = fp8_.head_norm_kernel(x, norm, w, e.rope->head_dim);
    return k != Fp8Linear::HeadNorm::None &&
           qk_norm_fits(e.q_norm, e.k_norm, *e.rope, k == Fp8Linear::HeadNorm::Skinny);
  }
  template <typename E>
  static cuda::QkNorm<E> qk_norm_of(const Tensor& q_norm, const Tensor& k_norm, float eps) {
    if (!q_norm.defined()) return {};
    return {ptr<E>(q_norm), ptr<E>(k_norm), eps};
  }

  // The QKV GEMV (M = 1; with a q/k norm where qk_norm_fits) or skinny GEMM with the RoPE epilogue.
  void qkv_rope_gemv(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& positions,
                     const RopeConfig& cfg, const Tensor& q_norm, const Tensor& k_norm, float eps, const Tensor& q,
                     const Tensor& k, const Tensor& v) {
    const int D = cfg.head_dim;
    const Tensor& inv = inv_freq(cfg);
    if (q.dim(0) > 1) {
      GS_CUDA_CHECK(cuda::skinny_gemm_qkv_rope(
          ptr<bf16_t>(x), ptr<bf16_t>(w), bias.defined() ? ptr<bf16_t>(bias) : nullptr, ptr<int32_t>(positions),
          ptr<float>(inv), ptr<bf16_t>(q), ptr<bf16_t>(k), ptr<bf16_t>(v), int(q.dim(0)), int(q.row_elems() / D),
          int(k.row_elems() / D), D, int(w.row_elems()), cfg.long_from, s()));
      return;
    }
    by_dtype([&](auto e) {
      using E = decltype(e);
      GS_CUDA_CHECK(cuda::gemv_qkv_rope<E>(
          ptr<E>(x), ptr<E>(w), bias.defined() ? ptr<E>(bias) : nullptr, ptr<int32_t>(positions), ptr<float>(inv),
          ptr<E>(q), ptr<E>(k), ptr<E>(v), int(q.dim(0)), int(q.row_elems() / D), int(k.row_elems() / D), D,
          int(w.row_elems()), cfg.long_from, s(), qk_norm_of<E>(q_norm, k_norm, eps), qkv_wide_max_blocks()));
    });
  }
  // The one-token QKV GEMV's wide blocks (LinearKernelOptions::qkv_wide_sm_percent).
  int qkv_wide_max_blocks() const {
    static const int sms = cuda_current_sm_count(132);
    return sms * std::max(0, linear_.qkv_wide_sm_percent) / 100;
  }

  // The inverse-frequency table of a rope config, uploaded at its first (eager) use.
  const Tensor& inv_freq(const RopeConfig& c) {
    const RopeKey key{c.theta,
                      c.head_dim,
                      c.llama3_factor,
                      c.llama3_low_freq_factor,
                      c.llama3_high_freq_factor,
                      c.llama3_original_max_position,
                      c.long_from,
                      c.short_factor,
                      c.long_factor,
                      c.yarn_factor,
                      c.yarn_beta_fast,
                      c.yarn_beta_slow,
                      c.yarn_original_max_position,
                      c.yarn_truncate};
    if (auto it = rope_tables_.find(key); it != rope_tables_.end()) return it->second;
    GS_CHECK(!stream_.capturing(),
             "rope: first use of a rope config (head_dim {}) inside a graph capture; run the "
             "model eagerly once (warm-up) before capturing",
             c.head_dim);
    const std::vector<float> f = rope_inv_freq(c);
    Tensor t = upload(f.data(), DType::F32, {int64_t(f.size())}, DType::F32);
    return rope_tables_.emplace(key, std::move(t)).first->second;
  }

  int device_;
  DType dtype_;
  LinearKernelOptions linear_;
  MoeKernelOptions moe_;
  DecodeKernelOptions decode_;
  CudaAllocator alloc_;
  CudaStream stream_;
  LtGemm gemm_;
  CudaLoraOps lora_;
  Fp8Linear fp8_;
  mutable uint64_t enqueued_ = 0;  // s() calls (expire_handoff)
  uint64_t handoff_at_ = 0;        // enqueued_ when fp8_'s handoff was stored
  NormHandoff norm_handoff_;       // the last residual add's x for the next norm (LinearKernelOptions::norm_handoff_*)
  std::map<RopeKey, Tensor> rope_tables_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device, DType dtype, const KernelOptions& options) {
  const int n = cuda_device_count();
  GS_CHECK(device >= 0 && device < n, "CUDA device {} does not exist ({} device(s) visible)", device, n);
  GS_CHECK(dtype == DType::BF16 || dtype == DType::F32,
           "the CUDA backend computes in bfloat16 or float32, not {}; use --dtype bfloat16 or float32",
           dtype_name(dtype));
  return std::make_unique<CudaBackend>(device, dtype, options);
}

}  // namespace gs
