// The CPU backend: fp32 compute, host memory, a CpuStream whose kernels are closures.
//
// Every op checks shapes when it is enqueued, then launches a closure that captures only raw
// pointers and sizes, so a captured graph replays against whatever the buffers hold then.
#include <cmath>
#include <cstring>
#include <vector>

#include "core/cpu_stream.h"
#include "core/error.h"
#include "ops/backend.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/cpu_lora.h"
#include "ops/cpu/cpu_moe.h"
#include "ops/fp8_weights.h"
#include "ops/lora_shape.h"

namespace gs {

namespace {

void check_f32(const Tensor& t, const char* op, const char* name) {
  GS_CHECK(t.defined(), "{}: {} is undefined", op, name);
  GS_CHECK(t.device().is_cpu(), "{}: {} is {}, expected a host tensor", op, name, t.str());
  GS_CHECK(t.dtype() == DType::F32, "{}: {} is {}, the CPU backend computes in f32", op, name, t.str());
}
void check_i32(const Tensor& t, const char* op, const char* name) {
  GS_CHECK(t.defined() && t.dtype() == DType::I32 && t.device().is_cpu(), "{}: {} must be a host i32 tensor, got {}",
           op, name, t.defined() ? t.str() : "undefined");
}
void check_2d(const Tensor& t, int64_t rows, int64_t cols, const char* op, const char* name) {
  GS_CHECK(t.ndim() == 2 && t.dim(0) == rows && t.dim(1) == cols, "{}: {} is {}, expected [{}, {}]", op, name, t.str(),
           rows, cols);
}
const float* f(const Tensor& t) { return t.data_as<const float>(); }
float* fm(const Tensor& t) { return t.data_as<float>(); }
const int32_t* i32(const Tensor& t) { return t.data_as<const int32_t>(); }

class CpuBackend final : public Backend {
 public:
  CpuBackend() : stream_(&alloc_) {}

  Device device() const override { return Device::cpu(); }
  std::string name() const override { return "cpu"; }
  DType compute_dtype() const override { return DType::F32; }
  Allocator& allocator() override { return alloc_; }
  Stream& stream() override { return stream_; }

  void copy(const Tensor& dst, const Tensor& src) override {
    GS_CHECK(dst.device().is_cpu() && src.device().is_cpu(),
             "copy: the CPU backend copies host tensors only ({} <- {})", dst.str(), src.str());
    GS_CHECK(dst.dtype() == src.dtype() && dst.nbytes() == src.nbytes(), "copy: {} <- {}: dtype and size must match",
             dst.str(), src.str());
    void* d = dst.data();
    const void* s = src.data();
    const size_t n = src.nbytes();
    if (n == 0 || d == s) return;
    stream_.launch([d, s, n] { std::memmove(d, s, n); });
  }

  void copy_leading_columns(const Tensor& dst, const Tensor& src) override {
    check_leading_columns(dst, src);
    GS_CHECK(dst.device().is_cpu() && src.device().is_cpu(),
             "copy_leading_columns: the CPU backend copies host tensors only ({} <- {})", dst.str(), src.str());
    const int64_t rows = src.dim(0);
    if (rows == 0 || src.nbytes() == 0) return;
    const size_t row = src.nbytes() / size_t(rows), pitch = dst.nbytes() / size_t(rows);
    auto* d = static_cast<char*>(dst.data());
    const auto* s = static_cast<const char*>(src.data());
    stream_.launch([d, s, row, pitch, rows] {
      for (int64_t r = 0; r < rows; ++r) std::memcpy(d + r * pitch, s + r * row, row);
    });
  }

  Tensor upload(const void* host, DType host_dtype, const Shape& shape, DType dtype) override {
    Tensor t = Tensor::empty(shape, dtype, alloc_);
    convert_host(host, host_dtype, t.data(), dtype, size_t(t.numel()));
    return t;
  }

  void fill_zero(const Tensor& t) override {
    void* p = t.data();
    const size_t n = t.nbytes();
    if (n) stream_.launch([p, n] { std::memset(p, 0, n); });
  }

  void embedding(const Tensor& ids, const Tensor& table, const Tensor& out) override {
    embedding_rows(ids, table, out, "embedding", [](auto... a) { cpu::embedding(a...); });
  }

  void embedding_shard(const Tensor& ids, const Tensor& table, int64_t first, const Tensor& out) override {
    embedding_rows(ids, table, out, "embedding_shard",
                   [first](const int32_t* id, const float* tb, float* o, int64_t T, int64_t V, int64_t H) {
                     cpu::embedding_shard(id, tb, first, o, T, V, H);
                   });
  }

  // embedding and embedding_shard: the same checks, then `kernel(ids, table, out, T, V, H)` on the stream.
  template <typename Kernel>
  void embedding_rows(const Tensor& ids, const Tensor& table, const Tensor& out, const char* op, Kernel kernel) {
    check_i32(ids, op, "ids");
    check_f32(table, op, "table");
    check_f32(out, op, "out");
    const int64_t T = ids.numel(), V = table.dim(0), H = table.dim(1);
    check_2d(out, T, H, op, "out");
    auto* id = i32(ids);
    auto* tb = f(table);
    auto* o = fm(out);
    stream_.launch([=] { kernel(id, tb, o, T, V, H); });
  }

  void rms_norm(const Tensor& x, const Tensor& w, float eps, const Tensor& out) override {
    check_f32(x, "rms_norm", "x"), check_f32(w, "rms_norm", "w"), check_f32(out, "rms_norm", "out");
    const int64_t T = x.dim(0), H = x.dim(1);
    check_2d(out, T, H, "rms_norm", "out");
    GS_CHECK(w.numel() == H, "rms_norm: weight {} does not match hidden size {}", w.str(), H);
    auto *xp = f(x), *wp = f(w);
    auto* o = fm(out);
    stream_.launch([=] { cpu::rms_norm(xp, wp, eps, o, T, H); });
  }

  void add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& w, float eps, const Tensor& out) override {
    check_f32(residual, "add_rms_norm", "residual"), check_f32(x, "add_rms_norm", "x");
    check_f32(w, "add_rms_norm", "w"), check_f32(out, "add_rms_norm", "out");
    const int64_t T = residual.dim(0), H = residual.dim(1);
    check_2d(x, T, H, "add_rms_norm", "x");
    check_2d(out, T, H, "add_rms_norm", "out");
    GS_CHECK(w.numel() == H, "add_rms_norm: weight {} does not match hidden size {}", w.str(), H);
    auto* r = fm(residual);
    auto *xp = f(x), *wp = f(w);
    auto* o = fm(out);
    stream_.launch([=] { cpu::add_rms_norm(r, xp, wp, eps, o, T, H); });
  }

  using Backend::linear;  // the LinearOp form: Backend's unfused sequence
  void linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y) override {
    check_f32(x, "linear", "x"), check_f32(w, "linear", "w"), check_f32(y, "linear", "y");
    GS_CHECK(x.ndim() == 2 && w.ndim() == 2 && x.dim(1) == w.dim(1), "linear: x {} and w {} disagree on K", x.str(),
             w.str());
    const int64_t T = x.dim(0), K = x.dim(1), N = w.dim(0);
    check_2d(y, T, N, "linear", "y");
    const float* bp = nullptr;
    if (bias.defined()) {
      check_f32(bias, "linear", "bias");
      GS_CHECK(bias.numel() == N, "linear: bias {} does not match N = {}", bias.str(), N);
      bp = f(bias);
    }
    auto *xp = f(x), *wp = f(w);
    auto* yp = fm(y);
    if (T == 0) return;
    stream_.launch([=] { cpu::linear(xp, wp, bp, yp, T, N, K); });
  }

  void lora_shrink(const Tensor& x, const Tensor& a, const Tensor& slots, const Tensor& tmp) override {
    check_f32(x, "lora_shrink", "x"), check_f32(a, "lora_shrink", "a"), check_f32(tmp, "lora_shrink", "tmp");
    check_i32(slots, "lora_shrink", "slots");
    const LoraShape l = check_lora_shrink(x, a, slots, tmp);
    auto *xp = f(x), *ap = f(a);
    auto* tp = fm(tmp);
    auto* sp = i32(slots);
    if (l.T) stream_.launch([=] { cpu::lora_shrink(xp, ap, sp, tp, l.T, l.K, l.R, l.S); });
  }

  // The reference computes every product: the zero blocks of a fused bt (parts) add nothing.
  using Backend::lora_expand;
  void lora_expand(const Tensor& tmp, const Tensor& bt, const Tensor& slots, const Tensor& y,
                   const LoraParts& parts) override {
    check_f32(tmp, "lora_expand", "tmp"), check_f32(bt, "lora_expand", "bt"), check_f32(y, "lora_expand", "y");
    check_i32(slots, "lora_expand", "slots");
    const LoraShape l = check_lora_expand(tmp, bt, slots, y);
    check_lora_parts(parts, l);
    auto *tp = f(tmp), *bp = f(bt);
    auto* yp = fm(y);
    auto* sp = i32(slots);
    if (l.T) stream_.launch([=] { cpu::lora_expand(tp, bp, sp, yp, l.T, l.R, l.N, l.S); });
  }

  void split_qkv_rope(const Tensor& qkv, const Tensor& positions, const RopeConfig& cfg, const Tensor& q_norm,
                      const Tensor& k_norm, float eps, const Tensor& q, const Tensor& k, const Tensor& v) override {
    const char* op = "split_qkv_rope";
    check_f32(qkv, op, "qkv"), check_f32(q, op, "q"), check_f32(k, op, "k"), check_f32(v, op, "v");
    check_i32(positions, op, "positions");
    const int64_t T = positions.numel(), D = cfg.head_dim;
    GS_CHECK(D > 0 && D % 2 == 0 && q.ndim() == 2 && k.ndim() == 2 && q.dim(1) % D == 0 && k.dim(1) % D == 0,
             "{}: q {} / k {} rows are not whole heads of an even head_dim {}", op, q.str(), k.str(), D);
    const int64_t QW = q.dim(1), KW = k.dim(1);
    check_2d(q, T, QW, op, "q"), check_2d(k, T, KW, op, "k"), check_2d(v, T, KW, op, "v");
    check_2d(qkv, T, QW + 2 * KW, op, "qkv");
    GS_CHECK(q_norm.defined() == k_norm.defined(), "{}: give both q_norm and k_norm or neither", op);
    const float *qn = nullptr, *kn = nullptr;
    if (q_norm.defined()) {
      check_f32(q_norm, op, "q_norm"), check_f32(k_norm, op, "k_norm");
      GS_CHECK(q_norm.numel() == D && k_norm.numel() == D, "{}: q_norm {} / k_norm {} must have {} elements", op,
               q_norm.str(), k_norm.str(), D);
      qn = f(q_norm), kn = f(k_norm);
    }
    std::vector<float> inv = rope_inv_freq(cfg);  // owned by the closure, so replay-safe
    const int lf = cfg.long_from;
    auto* src = f(qkv);
    auto *qp = fm(q), *kp = fm(k), *vp = fm(v);
    auto* pp = i32(positions);
    stream_.launch([=, inv = std::move(inv)] {
      const int64_t W = QW + 2 * KW;
      for (int64_t t = 0; t < T; ++t) {
        std::memcpy(qp + t * QW, src + t * W, size_t(QW) * sizeof(float));
        std::memcpy(kp + t * KW, src + t * W + QW, size_t(KW) * sizeof(float));
        std::memcpy(vp + t * KW, src + t * W + QW + KW, size_t(KW) * sizeof(float));
      }
      if (qn) {
        cpu::head_rms_norm(qp, qn, eps, T, QW, D);
        cpu::head_rms_norm(kp, kn, eps, T, KW, D);
      }
      cpu::rope(qp, pp, inv.data(), T, QW / D, D, lf);
      cpu::rope(kp, pp, inv.data(), T, KW / D, D, lf);
    });
  }

  void gated_activation(GatedActivation act, const Tensor& gate_up, const Tensor& out) override {
    check_f32(gate_up, "gated_activation", "gate_up"), check_f32(out, "gated_activation", "out");
    const int64_t T = out.dim(0), I = out.dim(1);
    check_2d(gate_up, T, 2 * I, "gated_activation", "gate_up");
    auto* g = f(gate_up);
    auto* o = fm(out);
    stream_.launch([=] { cpu::gated_activation(act, g, o, T, I); });
  }

  void scale(const Tensor& x, float alpha) override {
    check_f32(x, "scale", "x");
    float* p = fm(x);
    const int64_t n = x.numel();
    stream_.launch([=] {
      for (int64_t i = 0; i < n; ++i) p[i] *= alpha;
    });
  }

  void softcap(const Tensor& x, float cap) override {
    check_f32(x, "softcap", "x");
    GS_CHECK(cap > 0, "softcap: cap must be positive, got {}", cap);
    float* p = fm(x);
    const int64_t n = x.numel();
    stream_.launch([=] {
      for (int64_t i = 0; i < n; ++i) p[i] = cap * std::tanh(p[i] / cap);
    });
  }

  void gather_rows(const Tensor& x, const Tensor& idx, const Tensor& out) override {
    check_f32(x, "gather_rows", "x"), check_i32(idx, "gather_rows", "idx"), check_f32(out, "gather_rows", "out");
    const int64_t n = idx.numel(), rows = x.dim(0), H = x.row_elems();
    GS_CHECK(out.dim(0) == n && out.row_elems() == H, "gather_rows: out {} must be [{}, {}]", out.str(), n, H);
    auto* xp = f(x);
    auto* ip = i32(idx);
    auto* o = fm(out);
    stream_.launch([=] { cpu::gather_rows(xp, ip, o, n, rows, H); });
  }

  void moe_route(const Tensor& logits, const Tensor& bias, const MoeRouting& r, const Tensor& ids,
                 const Tensor& weights) override {
    cpu::enqueue_moe_route(stream_, logits, bias, r, ids, weights);
  }
  void moe_experts(const MoeExpertsArgs& a) override {
    cpu::enqueue_moe_experts(stream_, a);
    if (a.then) add_rms_norm(a.then->residual, a.out, a.then->weight, a.then->eps, a.then->out);
  }
  // Weights stay f32, holding the exact value of their FP8 quantization.
  void quantize_fp8(const Tensor& src, int64_t group_rows, bool block128, const Tensor& dst) override {
    check_f32(src, "quantize_fp8", "src"), check_f32(dst, "quantize_fp8", "dst");
    GS_CHECK(src.ndim() == 2 && dst.shape() == src.shape(), "quantize_fp8: dst {} must have src's shape {}", dst.str(),
             src.str());
    stream_.synchronize();
    fp8_quantize_host(f(src), src.dim(0), src.dim(1), group_rows, block128, nullptr, nullptr, fm(dst));
  }

 private:
  CpuAllocator alloc_;
  CpuStream stream_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace gs
