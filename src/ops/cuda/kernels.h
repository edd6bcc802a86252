// Launchers of the CUDA backend's kernels: raw device pointers in, work enqueued on `s`.
//
// Each float-tensor launcher is a template over the element type T of the compute dtype:
// bf16_t (bf16 stored as uint16_t) or float; both are instantiated. Math is fp32 throughout.
// Every launcher returns cudaGetLastError() so callers (host code in .cpp files) check each
// launch. Shapes are validated by the caller.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/dtype.h"
#include "ops/cuda/fp8_kernels.h"
#include "ops/dummy_fill.h"
#include "ops/gated_activation.h"
#include "ops/peer_sum.h"

namespace gs::cuda {

using bf16_t = uint16_t;

// The FP8 GEMM's scales and bias (ops/cuda/fp8_linear.h), applied by the kernel that consumes its
// unscaled product: where `row` is set, that kernel reads element (t, n) of its input y as
// y[t, n] * (row[t] * col[n]) + bias[n] (bias bf16, or null), and stores nothing of y back. The
// pointers are device memory, col and bias 16-byte aligned for the vector paths.
struct OutputScales {
  const float* row = nullptr;
  const float* col = nullptr;
  const bf16_t* bias = nullptr;
};

// A per-token FP8 copy of an op's bf16 output (Fp8Linear's handoff to the projection that reads
// it): where q is set, the op also stores q[t, :] = e4m3(out[t, :] / scales[t]) with scales[t] =
// amax(out[t, :]) / 448 (1 for a row of zeros), from out as stored, so that the copy is
// fp8_quantize_rows(out) bit for bit: the row-wise vector kernels write it as they store out, the
// others run fp8_quantize_rows after them. q 16-byte aligned.
struct QuantizedOut {
  uint8_t* q = nullptr;
  float* scales = nullptr;
};

// "The others": the launchers whose kernel does not store that copy return through this, which
// enqueues fp8_quantize_rows(out) after the op where the copy is asked for (T bf16; f32 outputs
// write none). e, the op's launch error, is passed through.
template <typename T>
cudaError_t quantize_out_after(cudaError_t e, const T* out, int rows, int N, const QuantizedOut& qo, cudaStream_t s) {
  if constexpr (std::is_same_v<T, bf16_t>)
    if (qo.q && e == cudaSuccess) return fp8_quantize_rows(out, rows, N, qo.q, qo.scales, s);
  return e;
}

// out[i] = f(i) for i in [0, n) as dt (F32 or BF16; else cudaErrorInvalidValue): a dummy weight
// (ops/dummy_fill.h) computed in place.
cudaError_t fill_dummy(void* out, DType dt, int64_t n, const DummyFill& f, cudaStream_t s);

// out[t, :] = table[ids[t], :]; rows of ids outside [0, V) are zeroed. O is T or float (an
// fp32 residual stream).
template <typename T, typename O>
cudaError_t embedding(const int32_t* ids, const T* table, O* out, int T_, int V, int H, cudaStream_t s);
// out = x / rms(x) * w per row of H elements; x is T or float (the fp32 residual).
template <typename T, typename X>
cudaError_t rms_norm(const X* x, const T* w, float eps, T* out, int T_, int H, cudaStream_t s);
// residual += x; out = rms_norm(residual). x may alias out; residual is T or float; x read through
// `sc` (columns of x) where sc.row is set; out's FP8 copy written where qo.q is set (T bf16; f32 writes none).
template <typename T, typename R>
cudaError_t add_rms_norm(R* residual, const T* x, const T* w, float eps, T* out, int T_, int H, cudaStream_t s,
                         OutputScales sc = {}, QuantizedOut qo = {});
// Fused QKV epilogue: qkv [T, (hq + 2 hkv) D] -> q [T, hq D], k, v [T, hkv D]; per-head RMSNorm
// of q and k when q_norm (and k_norm) are non-null, then rotate-half RoPE of q and k. D <= 256.
// qkv read through `sc` (columns of the fused row) where sc.row is set.
template <typename T>
cudaError_t split_qkv_rope(const T* qkv, const int32_t* positions, const float* inv_freq, const T* q_norm,
                           const T* k_norm, float eps, T* q, T* k, T* v, int T_, int hq, int hkv, int D, int long_from,
                           cudaStream_t s, OutputScales sc = {});
// out[t, i] = act(gate_up[t, i]) * gate_up[t, I + i]; 16-byte vectors when I % 8 == 0 and
// both pointers are 16-byte aligned; gate_up read through `sc` (columns of 2 I) where sc.row is set;
// out's FP8 copy written where qo.q is set (T bf16, then a block a row; f32 writes none).
template <typename T>
cudaError_t gated_activation(GatedActivation act, const T* gate_up, T* out, int T_, int I, cudaStream_t s,
                             OutputScales sc = {}, QuantizedOut qo = {});
// In place over n elements: x *= alpha, or x = cap * tanh(x / cap) when cap > 0.
template <typename T>
cudaError_t scale_softcap(T* x, int64_t n, float alpha, float cap, cudaStream_t s);
// y[t, :] += bias (y f32 when y_f32, else T).
template <typename T>
cudaError_t add_bias(void* y, bool y_f32, const T* bias, int T_, int N, cudaStream_t s);

// out[i, :] = x[idx[i], :] for rows of row_bytes bytes; idx outside [0, T) gives zeros.
cudaError_t gather_rows(const void* x, const int32_t* idx, void* out, int n, int T, int64_t row_bytes, cudaStream_t s);

// Small-M GEMV: y[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n]) for M <= kGemvMaxM rows.
// Needs K a multiple of a 16-byte vector and 16-byte aligned x and w (gemv_supported says
// whether it applies). Faster than cuBLASLt at M = 1, slower from M = 2 on for the large
// projections (it re-reads x from L1 per weight vector), so M = 1 only.
constexpr int kGemvMaxM = 1;
bool gemv_supported(int M, int K, int elem_bytes, const void* x, const void* w);
// A GEMV's input row: x, or (norm fused, M = 1) x = rms_norm(residual) * norm_w (eps) of the f32
// residual row, computed inside the GEMV: each warp sums the squares of the residual chunks it
// reads, and the outputs are scaled by 1 / rms before the epilogue (saving the norm's launch;
// x is not rounded to T, so results differ from rms_norm + gemv by rounding only).
template <typename T>
struct GemvInput {
  const T* x = nullptr;
  const float* residual = nullptr;
  const T* norm_w = nullptr;
  float eps = 0.0f;
  T* normed = nullptr;  // with residual: the GEMV also stores rms_norm(residual) * norm_w here (a share a block)
  // The norm handoff (gemv_gated's, gemv_qkv_rope's and gemv_fp8_qkv_rope_head_norm's x;
  // LinearKernelOptions::norm_handoff_min_k / max_k): where set, xn = residual * norm_w rounded to T, stored by
  // gemv_add_residual, is read as x, and the residual only for its sum of squares (each block sums the row once, a
  // slice a warp); no normed store. Results differ from the norm in the kernel by x's rounding to T.
  const T* xn = nullptr;
  GemvInput(const T* x_) : x(x_) {}  // NOLINT(google-explicit-constructor): plain x reads as before
  GemvInput(const float* residual_, const T* norm_w_, float eps_, T* normed_ = nullptr)
      : residual(residual_), norm_w(norm_w_), eps(eps_), normed(normed_) {}
  static GemvInput handoff(const T* xn_, const float* residual_, const T* norm_w_, float eps_) {
    GemvInput in(residual_, norm_w_, eps_);
    in.xn = xn_;
    return in;
  }
};
template <typename T>
bool gemv_supported(int M, int K, const GemvInput<T>& x, const T* w);
template <typename T>
cudaError_t gemv(const GemvInput<T>& x, const T* w, const T* bias, void* y, bool y_f32, int M, int N, int K,
                 cudaStream_t s);
// residual[n] += x . w[n] rounded to T (M = 1; the o_proj / down GEMV with linear + add_rms_norm's
// residual add in its epilogue, for a following GEMV that fuses the norm). With xn (and the next
// norm's weight norm_w): also xn[n] = residual[n] * norm_w[n] rounded to T, after the add, for
// that GEMV's GemvInput::handoff.
template <typename T>
cudaError_t gemv_add_residual(const T* x, const T* w, float* residual, int M, int N, int K, cudaStream_t s,
                              const T* norm_w = nullptr, T* xn = nullptr);
// The row-parallel o_proj / down under tensor parallelism at one token, with the all-reduce and
// the residual add + RMSNorm after it folded in (ops/peer_sum.h): y = this rank's partial x . w
// (rounded to T, -0 as +0) is stored in y and pushed into every peer's exchange buffer as each
// output is done; the grid's last block to finish sums the ranks' rows in rank order, adds the sum
// to the f32 residual and stores out = rms_norm(residual) * norm_w (out may alias y). The sum and
// the residual equal the custom all-reduce's fused add + norm bit for bit; out differs from it by
// the order of the block's sum of squares. gemv_peer_sum_supported says which N it takes.
bool gemv_peer_sum_supported(int N, int K, int elem_bytes);
template <typename T>
cudaError_t gemv_peer_sum(const T* x, const T* w, T* y, float* residual, const T* norm_w, float eps, T* out, int N,
                          int K, const PeerSum& ps, cudaStream_t s);
// Qwen3's per-head q / k RMSNorm (weights [D], eps) for gemv_qkv_rope; q null: none.
template <typename T>
struct QkNorm {
  const T* q = nullptr;
  const T* k = nullptr;
  float eps = 0.0f;
};
// Whether gemv_qkv_rope takes a QkNorm at head dim D (a cluster of at most 8 blocks computes a head).
bool gemv_qk_norm_supported(int D);
// QKV GEMV with split_qkv_rope's epilogue, M = 1: the rotary pair of rows (i, i + D/2) of every
// head in one warp, q and k (RMS-normed first with a QkNorm) rotated at positions[0] (inv_freq as
// rope), all three written split; bias [(hq + 2 hkv) D] or null. Without a QkNorm and with
// wide_max_blocks > 0 and K >= 1024, in the fewer of 16 or 32 warps a block that make at most that
// many blocks (one an SM: LinearKernelOptions::qkv_wide_sm_percent), else K split over 4-warp
// blocks.
template <typename T>
cudaError_t gemv_qkv_rope(const GemvInput<T>& x, const T* w, const T* bias, const int32_t* positions,
                          const float* inv_freq, T* q, T* k, T* v, int M, int hq, int hkv, int D, int K, int long_from,
                          cudaStream_t s, const QkNorm<T>& qk_norm = {}, int wide_max_blocks = 0);
// The same with the QkNorm on e4m3 weights w [N, K] and their f32 scales wscale [N, groups] (the
// FP8 linear's: groups 1, one a row, or K / 128, one a 128-k block of the row), x bf16, M = 1
// (Fp8KernelOptions::head_norm_gemv); x may be a norm handoff (GemvInput::handoff), as the
// bf16 QKV GEMV's. Each 16-byte load holds 16 weights, widened to bf16 exactly
// in registers; a row's dot product is multiplied by its scale before the epilogue, or each block's
// products by the block's as they are added, as the skinny FP8 kernel does. The supported check:
// K a multiple of 16 (of 128 with blocks), x (or the residual and norm weight) and w 16-byte
// aligned, gemv_qk_norm_supported(D).
bool gemv_fp8_qk_norm_supported(int K, int D, int groups, const GemvInput<bf16_t>& x, const void* w,
                                const float* wscale);
// ... its shapes alone (K, D and the scale groups), whatever the pointers.
bool gemv_fp8_qk_norm_shape_supported(int K, int D, int groups);
cudaError_t gemv_fp8_qkv_rope_head_norm(const GemvInput<bf16_t>& x, const uint8_t* w, const float* wscale, int groups,
                                        const bf16_t* bias, const int32_t* positions, const float* inv_freq, bf16_t* q,
                                        bf16_t* k, bf16_t* v, int hq, int hkv, int D, int K, int long_from,
                                        cudaStream_t s, const QkNorm<bf16_t>& qk_norm);
// Gated GEMV (same preconditions): out[m, i] = act(x[m] . w[i]) * (x[m] . w[I + i]) for the
// fused gate/up weight w [2I, K] and out [M, I].
template <typename T>
cudaError_t gemv_gated(GatedActivation act, const GemvInput<T>& x, const T* w, T* out, int M, int I, int K,
                       cudaStream_t s);

}  // namespace gs::cuda
