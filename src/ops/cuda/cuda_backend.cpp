// Implements ops/cuda/cuda_backend.h.
#include "ops/cuda/cuda_backend.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>
#include <vector>

#include "core/cuda/cuda_allocator.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_device.h"
#include "core/cuda/cuda_stream.h"
#include "core/env.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/lora_kernels.h"
#include "ops/cuda/lt_gemm.h"
#include "ops/cuda/shard_kernels.h"
#include "ops/lora_shape.h"

namespace gs {

namespace {

using cuda::bf16_t;

void need(const Tensor& t, DType d, const char* op, const char* name) {
  GS_CHECK(t.defined(), "{}: {} is undefined", op, name);
  GS_CHECK(t.device().is_cuda(), "{}: {} must be on the GPU, got {}", op, name, t.str());
  GS_CHECK(t.dtype() == d, "{}: {} must be {}, got {}", op, name, dtype_name(d), t.str());
}
void need_rows(const Tensor& t, int64_t rows, int64_t cols, const char* op, const char* name) {
  GS_CHECK(t.ndim() >= 1 && t.dim(0) == rows && t.row_elems() == cols, "{}: {} must be [{}, {}], got {}", op, name,
           rows, cols, t.str());
}
template <typename T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.data());
}
bool is_float(DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16; }

// A stream beside a backend's own, with the two events that fork work onto it and join it back
// (captured as graph edges when the main stream is capturing). RAII.
struct SideStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
  explicit SideStream(int device) {
    GS_CUDA_CHECK(cudaSetDevice(device));
    GS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    GS_CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    GS_CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  }
  ~SideStream() {
    if (join) cudaEventDestroy(join);
    if (fork) cudaEventDestroy(fork);
    if (stream) cudaStreamDestroy(stream);
  }
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;
};

using RopeKey = std::tuple<float, int, float, float, float, int, int, std::vector<float>, std::vector<float>>;

cudaMemcpyKind copy_kind(const Tensor& dst, const Tensor& src) {
  if (src.device().is_cpu()) return dst.device().is_cpu() ? cudaMemcpyHostToHost : cudaMemcpyHostToDevice;
  return dst.device().is_cpu() ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, DType dtype)
      : device_(device), dtype_(dtype), alloc_(device), stream_(device, &alloc_), gemm_(alloc_) {}

  Device device() const override { return Device::cuda(device_); }
  std::string name() const override { return "cuda"; }
  DType compute_dtype() const override { return dtype_; }
  Allocator& allocator() override { return alloc_; }
  Stream& stream() override { return stream_; }

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
    const int64_t H = check_norm(x, w, out, "add_rms_norm");
    need(residual, residual_dtype(residual), "add_rms_norm", "residual");
    need_rows(residual, x.dim(0), H, "add_rms_norm", "residual");
    by_dtype([&](auto e) {
      using E = decltype(e);
      if (residual.dtype() == DType::F32)
        GS_CUDA_CHECK((cuda::add_rms_norm<E, float>(ptr<float>(residual), ptr<E>(x), ptr<E>(w), eps, ptr<E>(out),
                                                    int(x.dim(0)), int(H), s())));
      else
        GS_CUDA_CHECK((cuda::add_rms_norm<E, E>(ptr<E>(residual), ptr<E>(x), ptr<E>(w), eps, ptr<E>(out), int(x.dim(0)),
                                                int(H), s())));
    });
  }

  void linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y) override {
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
      } else {
        gemm_.matmul(x.data(), w.data(), y.data(), dtype_ == DType::F32, f32, int(M), int(N), int(K), s());
      }
      if (b) GS_CUDA_CHECK(cuda::add_bias<E>(y.data(), f32, b, int(M), int(N), s()));
    });
  }

  GemmTuningReport tune_gemms(const GemmTuningOptions& opts) override {
    GS_CHECK(!stream_.capturing(), "tune_gemms: GEMMs cannot be timed inside a graph capture");
    const int elem = int(dtype_size(dtype_));
    return gemm_.tune(
        opts, std::string(dtype_name(dtype_)),
        [elem](int M, int K, const void* x, const void* w) { return cuda::gemv_supported(M, K, elem, x, w); }, s());
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
    const int64_t T = check_split_qkv_rope("split_qkv_rope", qkv, positions, cfg, q_norm, k_norm, q, k, v);
    const int D = cfg.head_dim;
    const Tensor& inv = inv_freq(cfg);
    by_dtype([&](auto e) {
      using E = decltype(e);
      const E* qn = q_norm.defined() ? ptr<E>(q_norm) : nullptr;
      const E* kn = k_norm.defined() ? ptr<E>(k_norm) : nullptr;
      GS_CUDA_CHECK(cuda::split_qkv_rope<E>(ptr<E>(qkv), ptr<int32_t>(positions), ptr<float>(inv), qn, kn, eps,
                                            ptr<E>(q), ptr<E>(k), ptr<E>(v), int(T), int(q.row_elems() / D),
                                            int(k.row_elems() / D), D, cfg.long_from, s()));
    });
  }

  void gated_activation(GatedActivation act, const Tensor& gate_up, const Tensor& out) override {
    need(gate_up, dtype_, "gated_activation", "gate_up");
    need(out, dtype_, "gated_activation", "out");
    const int64_t T = out.ndim() >= 1 ? out.dim(0) : 0, I = out.row_elems();
    need_rows(gate_up, T, 2 * I, "gated_activation", "gate_up");
    by_dtype([&](auto e) {
      using E = decltype(e);
      GS_CUDA_CHECK(cuda::gated_activation<E>(act, ptr<E>(gate_up), ptr<E>(out), int(T), int(I), s()));
    });
  }

  // One GEMV with the RoPE epilogue at M = 1 without q/k norm (decode); linear then
  // split_qkv_rope otherwise (and with GS_DECODE_FUSION=0).
  void linear_split_qkv_rope(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& positions,
                             const RopeConfig& cfg, const Tensor& q_norm, const Tensor& k_norm, float eps,
                             const Tensor& qkv, const Tensor& q, const Tensor& k, const Tensor& v) override {
    need(x, dtype_, "linear_split_qkv_rope", "x");
    const int64_t M = x.ndim() >= 1 ? x.dim(0) : 0, K = x.row_elems();
    if (decode_fusion_ && !q_norm.defined() && qkv_rope_gemv_fits(w, bias, positions, cfg, q, k, v, M, K) &&
        cuda::gemv_supported(int(M), int(K), int(dtype_size(dtype_)), x.data(), w.data())) {
      qkv_rope_gemv(x, w, bias, positions, cfg, q, k, v);
      return;
    }
    Backend::linear_split_qkv_rope(x, w, bias, positions, cfg, q_norm, k_norm, eps, qkv, q, k, v);
  }

  // One gated GEMV at M = 1 (decode); linear then gated_activation otherwise (and with
  // GS_DECODE_FUSION=0, for A/B timing).
  void linear_gated_activation(GatedActivation act, const Tensor& x, const Tensor& w, const Tensor& gate_up,
                               const Tensor& out) override {
    const char* op = "linear_gated_activation";
    need(x, dtype_, op, "x"), need(w, dtype_, op, "w"), need(out, dtype_, op, "out");
    const int64_t M = x.ndim() >= 1 ? x.dim(0) : 0, K = x.row_elems(), I = out.row_elems();
    if (decode_fusion_ && M > 0 && K > 0 && w.dim(0) == 2 * I && w.row_elems() == K && out.dim(0) == M &&
        cuda::gemv_supported(int(M), int(K), int(dtype_size(dtype_)), x.data(), w.data())) {
      by_dtype([&](auto e) {
        using E = decltype(e);
        GS_CUDA_CHECK(cuda::gemv_gated<E>(act, ptr<E>(x), ptr<E>(w), ptr<E>(out), int(M), int(I), int(K), s()));
      });
      return;
    }
    Backend::linear_gated_activation(act, x, w, gate_up, out);
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

  // At one token (the base projection is then a GEMV) on the side stream, forked from the main
  // one: it runs beside the GEMV that the model enqueues next, and lora_expand joins it. Measured
  // on an H200 (tools/gpu/NOTES.md): -0.075 ms a step at bs 1, +0.03 ms at bs 32 (beside a
  // cuBLASLt GEMM it only competes; with v5's rows-form shrink still +0.012), so larger batches
  // stay on the main stream; GS_LORA_FORK=0 keeps every shrink there, =all forks every one (A/B).
  // The expand, or the fused op in its place, joins it.
  void lora_shrink(const Tensor& x, const Tensor& a, const Tensor& slots, const Tensor& tmp) override {
    need(x, dtype_, "lora_shrink", "x"), need(a, dtype_, "lora_shrink", "a");
    need(slots, DType::I32, "lora_shrink", "slots"), need(tmp, DType::F32, "lora_shrink", "tmp");
    const LoraShape l = check_lora_shrink(x, a, slots, tmp);
    const bool fork = l.T <= lora_fork_upto_;
    cudaStream_t on = s();
    if (fork) {
      GS_CUDA_CHECK(cudaEventRecord(lora_side_.fork, s()));
      GS_CUDA_CHECK(cudaStreamWaitEvent(lora_side_.stream, lora_side_.fork, 0));
      on = lora_side_.stream;
    }
    auto run = [&](auto* xp, auto* ap) {
      GS_CUDA_CHECK(
          cuda::lora_shrink(xp, ap, ptr<int32_t>(slots), ptr<float>(tmp), int(l.T), int(l.K), int(l.R), int(l.S), on));
    };
    if (dtype_ == DType::BF16)
      run(ptr<bf16_t>(x), ptr<bf16_t>(a));
    else
      run(ptr<float>(x), ptr<float>(a));
    if (fork) {
      GS_CUDA_CHECK(cudaEventRecord(lora_side_.join, lora_side_.stream));
      lora_joined_ = false;
    }
  }

  void lora_expand(const Tensor& tmp, const Tensor& bt, const Tensor& slots, const Tensor& y,
                   const LoraParts& parts) override {
    need(tmp, DType::F32, "lora_expand", "tmp"), need(bt, dtype_, "lora_expand", "bt");
    need(slots, DType::I32, "lora_expand", "slots"), need(y, dtype_, "lora_expand", "y");
    const LoraShape l = check_lora_expand(tmp, bt, slots, y);
    check_lora_parts(parts, l);
    join_lora_shrink();
    const cuda::LoraColumnParts cols = column_parts(parts, l);
    auto run = [&](auto* bp, auto* yp) {
      GS_CUDA_CHECK(cuda::lora_expand(ptr<float>(tmp), bp, ptr<int32_t>(slots), yp, int(l.T), int(l.R), int(l.N),
                                      int(l.S), cols, s()));
    };
    if (dtype_ == DType::BF16)
      run(ptr<bf16_t>(bt), ptr<bf16_t>(y));
    else
      run(ptr<float>(bt), ptr<float>(y));
  }

  static cuda::LoraColumnParts column_parts(const LoraParts& parts, const LoraShape& l) {
    cuda::LoraColumnParts cols{int(l.R / parts.n)};
    if (parts.n > 1) cols.begin1 = int(parts.begin[1]);
    if (parts.n > 2) cols.begin2 = int(parts.begin[2]);
    return cols;
  }

  void lora_expand_split_qkv_rope(const Tensor& tmp, const Tensor& bt, const Tensor& slots, const LoraParts& parts,
                                  const Tensor& qkv, const Tensor& positions, const RopeConfig& cfg,
                                  const Tensor& q_norm, const Tensor& k_norm, float eps, const Tensor& q,
                                  const Tensor& k, const Tensor& v) override {
    const char* op = "lora_expand_split_qkv_rope";
    need(tmp, DType::F32, op, "tmp"), need(bt, dtype_, op, "bt"), need(slots, DType::I32, op, "slots");
    const LoraShape l = check_lora_expand(tmp, bt, slots, qkv);
    check_lora_parts(parts, l);
    const int64_t T = check_split_qkv_rope(op, qkv, positions, cfg, q_norm, k_norm, q, k, v);
    bool done = false;
    if (lora_fused(l.T) && !q_norm.defined() && parts.n == 3) {
      join_lora_shrink();
      const Tensor& inv = inv_freq(cfg);
      const int D = cfg.head_dim;
      by_dtype([&](auto e) {
        using E = decltype(e);
        cudaError_t err = cudaSuccess;
        done = cuda::lora_expand_split_qkv_rope<E>(
            ptr<float>(tmp), ptr<E>(bt), ptr<int32_t>(slots), column_parts(parts, l), int(l.R), int(l.S), ptr<E>(qkv),
            ptr<int32_t>(positions), ptr<float>(inv), ptr<E>(q), ptr<E>(k), ptr<E>(v), int(T), int(q.row_elems() / D),
            int(k.row_elems() / D), D, cfg.long_from, s(), &err);
        GS_CUDA_CHECK(err);
      });
    }
    if (!done)
      Backend::lora_expand_split_qkv_rope(tmp, bt, slots, parts, qkv, positions, cfg, q_norm, k_norm, eps, q, k, v);
  }

  // The main stream waits for a forked lora_shrink (before the op that reads its tmp).
  void join_lora_shrink() {
    if (lora_joined_) return;
    GS_CUDA_CHECK(cudaStreamWaitEvent(s(), lora_side_.join, 0));
    lora_joined_ = true;
  }

  // The shrink forks onto the side stream up to this many tokens: 1 by default; GS_LORA_FORK=0
  // never, =all always (A/B, tools/gpu/lora_ab.sh).
  static int64_t lora_fork_upto() {
    if (env_is("GS_LORA_FORK", "all")) return INT64_MAX;
    return env_is("GS_LORA_FORK", "0") ? 0 : 1;
  }

  // The fused expand ops run one kernel below this many tokens (where their shapes allow):
  // always by default; GS_LORA_FUSE=0 never, =small below 64 (A/B, tools/gpu/lora_ab.sh).
  static int64_t lora_fuse_below() {
    if (env_is("GS_LORA_FUSE", "small")) return 64;
    return env_is("GS_LORA_FUSE", "0") ? 0 : INT64_MAX;
  }

  // Whether the fused expand ops run one kernel at T tokens: not at one token (measured slower:
  // the fused ops' single blocks per token against the unfused expand's many), else below
  // lora_fuse_below_.
  bool lora_fused(int64_t T) const { return T >= 2 && T < lora_fuse_below_; }

  // One kernel for both where the shapes allow: measured on an H200 (tools/gpu/NOTES.md, LoRA v5).
  void lora_expand_gated_activation(GatedActivation act, const Tensor& tmp, const Tensor& bt, const Tensor& slots,
                                    const Tensor& gate_up, const LoraParts& parts, const Tensor& out) override {
    const char* op = "lora_expand_gated_activation";
    need(tmp, DType::F32, op, "tmp"), need(bt, dtype_, op, "bt"), need(slots, DType::I32, op, "slots");
    need(gate_up, dtype_, op, "gate_up"), need(out, dtype_, op, "out");
    const LoraShape l = check_lora_expand(tmp, bt, slots, gate_up);
    check_lora_parts(parts, l);
    const int64_t I = out.row_elems();
    need_rows(out, l.T, I, op, "out");
    GS_CHECK(l.N == 2 * I, "{}: gate_up {} must be [{}, 2 x {}]", op, gate_up.str(), l.T, I);
    bool done = false;
    if (lora_fused(l.T) && parts.n == 2 && parts.begin[1] == I) {
      join_lora_shrink();
      by_dtype([&](auto e) {
        using E = decltype(e);
        cudaError_t err = cudaSuccess;
        done = cuda::lora_expand_gated_activation<E>(act, ptr<float>(tmp), ptr<E>(bt), ptr<int32_t>(slots),
                                                     ptr<E>(gate_up), ptr<E>(out), int(l.T), int(I), int(l.R), int(l.S),
                                                     s(), &err);
        GS_CUDA_CHECK(err);
      });
    }
    if (!done) Backend::lora_expand_gated_activation(act, tmp, bt, slots, gate_up, parts, out);
  }

  void lora_expand_add_rms_norm(const Tensor& tmp, const Tensor& bt, const Tensor& slots, const Tensor& residual,
                                const Tensor& x, const Tensor& w, float eps, const Tensor& out) override {
    const char* op = "lora_expand_add_rms_norm";
    need(tmp, DType::F32, op, "tmp"), need(bt, dtype_, op, "bt"), need(slots, DType::I32, op, "slots");
    const LoraShape l = check_lora_expand(tmp, bt, slots, x);
    const int64_t H = check_norm(x, w, out, op);
    need(residual, residual_dtype(residual), op, "residual");
    need_rows(residual, l.T, H, op, "residual");
    bool done = false;
    if (lora_fused(l.T)) {
      join_lora_shrink();
      by_dtype([&](auto e) {
        using E = decltype(e);
        cudaError_t err = cudaSuccess;
        auto run = [&](auto* res) {
          done = cuda::lora_expand_add_rms_norm(ptr<float>(tmp), ptr<E>(bt), ptr<int32_t>(slots), res, ptr<E>(x),
                                                ptr<E>(w), eps, ptr<E>(out), int(l.T), int(H), int(l.R), int(l.S), s(),
                                                &err);
        };
        if (residual.dtype() == DType::F32)
          run(ptr<float>(residual));
        else
          run(ptr<E>(residual));
        GS_CUDA_CHECK(err);
      });
    }
    if (!done) Backend::lora_expand_add_rms_norm(tmp, bt, slots, residual, x, w, eps, out);
  }

 private:
  cudaStream_t s() const { return stream_.handle(); }

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

  // Whether the QKV GEMV with the RoPE epilogue takes these shapes (M tokens of K inputs).
  bool qkv_rope_gemv_fits(const Tensor& w, const Tensor& bias, const Tensor& positions, const RopeConfig& cfg,
                          const Tensor& q, const Tensor& k, const Tensor& v, int64_t M, int64_t K) const {
    const char* op = "linear_split_qkv_rope";
    need(w, dtype_, op, "w"), need(positions, DType::I32, op, "positions");
    for (auto [t, n] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}}) need(*t, dtype_, op, n);
    if (bias.defined()) need(bias, dtype_, op, "bias");
    const int D = cfg.head_dim;
    const int64_t QW = q.row_elems(), KW = k.row_elems();
    return M > 0 && K > 0 && D > 0 && D % 2 == 0 && QW % D == 0 && KW % D == 0 && v.row_elems() == KW &&
           w.dim(0) == QW + 2 * KW && w.row_elems() == K && positions.numel() == M && q.dim(0) == M && k.dim(0) == M &&
           v.dim(0) == M && (!bias.defined() || bias.numel() == w.dim(0));
  }
  // The QKV GEMV with the RoPE epilogue.
  void qkv_rope_gemv(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& positions,
                     const RopeConfig& cfg, const Tensor& q, const Tensor& k, const Tensor& v) {
    const int D = cfg.head_dim;
    const Tensor& inv = inv_freq(cfg);
    by_dtype([&](auto e) {
      using E = decltype(e);
      GS_CUDA_CHECK(cuda::gemv_qkv_rope<E>(ptr<E>(x), ptr<E>(w), bias.defined() ? ptr<E>(bias) : nullptr,
                                           ptr<int32_t>(positions), ptr<float>(inv), ptr<E>(q), ptr<E>(k), ptr<E>(v),
                                           int(q.dim(0)), int(q.row_elems() / D), int(k.row_elems() / D), D,
                                           int(w.row_elems()), cfg.long_from, s()));
    });
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
                      c.long_factor};
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
  bool decode_fusion_ = !env_is("GS_DECODE_FUSION", "0");
  CudaAllocator alloc_;
  CudaStream stream_;
  LtGemm gemm_;
  int64_t lora_fork_upto_ = lora_fork_upto();
  int64_t lora_fuse_below_ = lora_fuse_below();
  SideStream lora_side_{device_};
  bool lora_joined_ = true;  // false from a forked lora_shrink to the lora_expand that joins it
  std::map<RopeKey, Tensor> rope_tables_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device, DType dtype) {
  const int n = cuda_device_count();
  GS_CHECK(device >= 0 && device < n, "CUDA device {} does not exist ({} device(s) visible)", device, n);
  GS_CHECK(dtype == DType::BF16 || dtype == DType::F32,
           "the CUDA backend computes in bfloat16 or float32, not {}; use --dtype bfloat16 or float32",
           dtype_name(dtype));
  return std::make_unique<CudaBackend>(device, dtype);
}

}  // namespace gs
