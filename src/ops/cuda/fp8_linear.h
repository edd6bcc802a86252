// Fp8Linear: the CUDA backend's linear() for FP8 e4m3 weights (ops/fp8_weights.h) and their
// quantization at load. Decode batches run the skinny tensor-core kernel on weights widened to bf16
// in registers (half the bytes of bf16), which also takes the decode epilogues (RoPE split, gated
// activation) and both halves of the deferred norm (the residual add after o_proj / down, the norm
// of the residual before QKV / gate-up, computed in the kernel): on whole-row scales up to
// Fp8KernelOptions::skinny_max_tokens, on 128x128 block scales (K a multiple of 128) up to 16
// tokens, each 128 k scaled in the kernel; other block-scaled widths run the CUDA-core FP8 GEMV up
// to 8 tokens. Larger batches run
// cuBLASLt's FP8 GEMM (ops/cuda/fp8_lt_gemm.h): on whole-row scales with activations quantized
// per token, the scales and bias applied by a pass of their own or, through linear_unscaled, by the
// op that consumes the product (whose output, where it is the next projection's input, comes
// quantized with it: the handoff below); on 128x128 blocks with activations quantized per token
// and 128 columns, scaled by the library (a chunk's last M % 4 rows, which its block modes refuse,
// by the GEMV; K a multiple of 512 and N of 128). Where neither is available (a shape the library
// refuses, an f32 output, blocks whose fused parts do not start on a block row), the weight is
// dequantized to bf16 through one persistent scratch for the bf16 GEMM.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "core/tensor.h"
#include "ops/cuda/fp8_lt_gemm.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/skinny_gemm.h"
#include "ops/gated_activation.h"
#include "ops/kernel_options.h"
#include "ops/linear_op.h"

namespace gs {

class Fp8Linear {
 public:
  Fp8Linear(Allocator& alloc, Fp8KernelOptions opts) : alloc_(alloc), opts_(opts) {}

  // Backend::quantize_fp8 for an F8E4M3 dst (scratch sized here, at load, never in a capture).
  void quantize(const Tensor& src, int64_t group_rows, bool block128, const Tensor& dst, cudaStream_t s);
  // y = x w^T (+ bias) for an FP8 w; x, bias bf16; y bf16 or f32. `dense(wb)` runs the backend's
  // bf16 linear on wb, w's dequantization, when neither FP8 kernel takes the shape.
  void linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, cudaStream_t s,
              const std::function<void(const Tensor& wb)>& dense);
  std::string describe() const;
  // Tunes cuBLASLt's FP8 GEMMs at the token counts where linear() runs them (Fp8LtGemm::tune).
  GemmTuningReport tune_gemms(const GemmTuningOptions& opts, cudaStream_t s);

  // Whether linear() takes x w^T (+ bias) into y through cuBLASLt and Fp8KernelOptions::
  // lt_fused_epilogues leaves the scales to the op that consumes y (host-only).
  bool scales_in_epilogue(const Tensor& x, const Tensor& w, const Tensor& y);
  // The consumer of rows [m0, m0 + m) of y, which hold the unscaled product when it runs: it reads
  // them through `sc` (the chunk's token scales, w's channel scales, the bias; sc.row null where
  // the rows are already scaled, on block-scaled weights).
  using ScaledRows = std::function<void(int m0, int m, const cuda::OutputScales& sc)>;
  // That path (scales_in_epilogue holds): x quantized per token and multiplied chunk by chunk of
  // Fp8KernelOptions::lt_max_rows rows, `then` enqueued after each chunk.
  void linear_unscaled(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, cudaStream_t s,
                       const ScaledRows& then);

  // The handoff (Fp8KernelOptions::quantize_in_producer): the op that writes the input x of the
  // next projection from this class's product (the gated activation, the residual add + norm) can
  // store x's per-token quantization as it stores x (cuda::QuantizedOut), and the next
  // linear_unscaled on x (whole-row scales) reads that instead of quantizing x. Where to store it
  // for rows of K columns: the quantization scratch while the rows fit one chunk (else none) ...
  cuda::QuantizedOut handoff_scratch(int64_t rows, int64_t K) const;
  // ... and once that op is enqueued: x holds it. The caller guarantees that nothing is enqueued
  // between that op and the projection (the backend drops the handoff otherwise).
  void hand_off(const Tensor& x);
  void drop_handoff() { handoff_ = {}; }
  // The gated activation stores the copy from this many tokens: it does so a block a row, and fewer
  // rows leave SMs idle, where its own kernel plus the projection's quantization is faster.
  static constexpr int kGatedHandoffMinTokens = 64;

  // Whether the skinny FP8 kernel, and so the fused forms below, take x [M, K] (bf16) times w.
  bool fuses(const Tensor& x, const Tensor& w) const;
  // ... and whether linear_qkv_rope takes Qwen3's q / k norm at M tokens of K (Fp8KernelOptions'
  // head_norm_max_tokens and head_norm_min_k; the head dim is cuda::skinny_qk_norm_supported's).
  bool fuses_head_norm(int64_t M, int64_t K) const {
    return M <= std::min(opts_.head_norm_max_tokens, cuda::kSkinnyHeadNormMaxM) && K >= opts_.head_norm_min_k;
  }
  // Which kernel linear_qkv_rope runs Qwen3's q / k norm on for x (or rms_norm(*norm)) times w at
  // head dim D: the skinny kernel where fuses_head_norm holds (and it takes D), else at one token the
  // FP8 GEMV (Fp8KernelOptions::head_norm_gemv; cuda::gemv_fp8_qk_norm_supported); None: the
  // projection, then split_qkv_rope.
  enum class HeadNorm { None, Gemv, Skinny };
  HeadNorm head_norm_kernel(const Tensor& x, const RmsNormInput* norm, const Tensor& w, int D) const;
  // ... whether at one token on w that kernel is the GEMV, on shapes alone: the one that reads a
  // norm handoff (cuda::GemvInput::handoff) as its input.
  bool head_norm_gemv_at_one_token(const Tensor& w, int D) const;
  // ... and whether they take x = rms_norm(norm) computed in the kernel (fuses(x, w) holds; the
  // residual f32 [M, K] on the GPU, the norm weight bf16 [K]).
  bool fuses_norm(const RmsNormInput& norm, const Tensor& x, const Tensor& w) const;
  // The fused forms (fuses(x, w) holds; the caller checked the epilogue's own shapes), on x, or
  // where norm is non-null (fuses_norm holds) on rms_norm(*norm), x left unwritten:
  // out = act(x . gate) * (x . up) for w = [gate; up];
  void linear_gated(GatedActivation act, const Tensor& x, const RmsNormInput* norm, const Tensor& w, const Tensor& out,
                    cudaStream_t s);
  // y = x w^T (+ bias), y bf16 or f32 (fuses_norm holds: x = rms_norm(norm), left unwritten);
  void linear_normed(const RmsNormInput& norm, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y,
                     cudaStream_t s);
  // residual (f32) += x w^T rounded to bf16;
  void linear_add_residual(const Tensor& x, const RmsNormInput* norm, const Tensor& w, const Tensor& residual,
                           cudaStream_t s);
  // at one token, x w^T as this rank's partial of a row-parallel projection, summed over the ranks
  // by the kernel (AddRmsNorm::peer_sum; fuses(x, w) and cuda::fp8_skinny_peer_sum_supported(N));
  void linear_peer_sum(const Tensor& x, const Tensor& w, const Tensor& y, const AddRmsNorm& a, cudaStream_t s);
  // split_qkv_rope of x w^T + bias, inv_freq the RoPE table of head_dim (with qk.q: the q/k norm,
  // on the kernel head_norm_kernel names, which must not be None). gemv_in, where set, is the
  // head-norm GEMV's input in place of x or rms_norm(*norm) (the backend's norm handoff, or the same
  // norm).
  void linear_qkv_rope(const Tensor& x, const RmsNormInput* norm, const Tensor& w, const Tensor& bias,
                       const Tensor& positions, const Tensor& inv_freq, int head_dim, int long_from, const Tensor& q,
                       const Tensor& k, const Tensor& v, cudaStream_t s, const cuda::QkNorm<cuda::bf16_t>& qk = {},
                       const cuda::GemvInput<cuda::bf16_t>* gemv_in = nullptr);

 private:
  // Whether cuBLASLt takes x w^T into y (bf16 y, every chunk's shape); the first shape it refuses
  // is logged.
  bool lt_takes(const Tensor& x, const Tensor& w, const Tensor& y);
  // The rows of an m-row chunk cuBLASLt takes: m, or on block-scaled weights (block) the first
  // m - m % 4 where its block modes refuse m (the rest go to the GEMV); 0 where it takes none.
  int lt_rows(int m, int N, int K, bool block);
  // Whether every block-scaled part inside w starts at a multiple of 128 rows (host-only; cached).
  bool block_rows_aligned(const Tensor& w);
  // The 128x128 block grid of w for cuBLASLt (block_rows_aligned holds): computed on w's first
  // call outside a graph capture and kept (the eager profiling step meets every weight first);
  // inside a capture without one, into the scratch by a kernel in the graph.
  const float* block_grid(const Tensor& w, cudaStream_t s);
  // Whether the FP8 GEMV takes x [M, K] (where the skinny kernel does not).
  bool gemv_takes(const Tensor& x, const Tensor& w) const;
  // The skinny kernel's view of w (host-only).
  cuda::Fp8Scaled scaled(const Tensor& w);

  Allocator& alloc_;
  Fp8KernelOptions opts_;
  std::unique_ptr<Fp8LtGemm> lt_;
  Tensor dequant_;  // bf16, as large as the largest FP8 weight
  Tensor xq_, xs_;  // e4m3 [lt_max_rows, largest K] and f32 [lt_max_rows (x largest K / 128)]: x quantized
  Tensor grid_;     // f32: the largest block-scaled weight's 128x128 block grid (scratch)
  std::map<const uint8_t*, Tensor> grids_;  // block_grid's, by weight
  const uint8_t* weight_begin_ = nullptr;   // the weight being quantized (quantize's fused parts)
  const uint8_t* part_end_ = nullptr;
  // Where each 128x128 block-scaled part quantize() wrote begins: a weight's block grid holds
  // only where each of its parts starts on a block row (block_rows_aligned).
  std::set<const uint8_t*> block_parts_;
  std::map<const uint8_t*, bool> aligned_;  // block_rows_aligned's answer per weight
  struct Handoff {
    const void* x = nullptr;  // the data of the x whose quantization xq_ / xs_ hold (hand_off)
    int64_t rows = 0, K = 0;
  } handoff_;
  bool warned_ = false;
};

}  // namespace gs
