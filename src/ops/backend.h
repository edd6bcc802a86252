// Backend: one device's memory, stream and ops, behind one interface (as ggml's backends).
//
// Every op enqueues work on stream() and returns at once; nothing is computed eagerly on the
// host. Ops never allocate: callers pass views of persistent buffers, so any sequence of ops
// can be captured into a graph. Shapes are row-major; `T` is the (padded) token count.
// Float tensors are in compute_dtype() unless an op says otherwise; ids/positions are I32.
#pragma once
#include <array>
#include <memory>
#include <optional>
#include <string>

#include "core/allocator.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "ops/decode_step.h"
#include "ops/dummy_fill.h"
#include "ops/gated_activation.h"
#include "ops/gemm_tuning.h"
#include "ops/linear_op.h"
#include "ops/moe.h"

namespace gs {

// The PEFT targets fused into one LoRA projection (q|k|v, gate|up): target c owns the y columns
// [begin[c], begin[c + 1]) (begin[0] = 0, the last up to N) and the rank rows [c R/n, (c+1) R/n),
// and bt is zero outside these blocks, so a backend may skip those products. n = 1: one target.
struct LoraParts {
  int n = 1;
  std::array<int64_t, 3> begin{};
};

// The fused LoRA expands (Backend::lora_expand with a SplitQkvRope without q/k norm, Gated or
// AddRmsNorm epilogue) and the shape one is asked for, for Backend::lora_stacked: tokens T, y's width N (without
// stacked columns), the head size (qkv).
enum class LoraFusedOp { SplitQkvRope, GatedActivation, AddRmsNorm };
struct LoraFusedShape {
  LoraFusedOp op = LoraFusedOp::AddRmsNorm;
  int64_t tokens = 0, width = 0;
  int head_dim = 0;
};

// Columns the stacked shrink adds to a projection's output for S slots of R rank rows: S R,
// rounded up to 8 so that rows stay 16-byte aligned.
inline int64_t lora_stacked_width(int64_t S, int64_t R) { return (S * R + 7) / 8 * 8; }

// Backend::moe_experts' operands: k = ids' width, E experts of intermediate width I.
//   out[t] = sum_j weights[t, j] * (down_e(act(g, u)) + down_bias[e]), e = ids[t, j],
//              g = gate_e x[t] + gate_up_bias[e, :I], u = up_e x[t] + gate_up_bias[e, I:]
//            + sigmoid(shared_gate[t, 0]) * shared[t]   (factor 1 without shared_gate)
// Undefined biases count as zero; act(g, u) is gated_act, or clamped_swiglu(g, u, swiglu_limit)
// for GatedActivation::ClampedSwiglu (gpt-oss). A pair whose id is < 0 (kMoeOtherRank: expert
// parallelism, another rank holds its expert) is skipped: its term is zero and no weight is read
// for it; the E experts are those this rank holds (MoeRouting::held_experts).
struct MoeExpertsArgs {
  GatedActivation act = GatedActivation::Silu;
  float swiglu_limit = 0.0f;  // ClampedSwiglu's limit (> 0)
  Tensor x;                   // [T, H]
  Tensor gate_up;             // [E 2I, H]: expert e's gate rows [2eI, 2eI + I), then its up rows
  Tensor down;                // [E H, I]: expert e's rows [eH, (e + 1) H)
  Tensor ids;                 // [T, k] i32 (moe_route's): in [0, E), or < 0 for another rank's expert
  Tensor weights;             // [T, k] f32
  Tensor shared;              // [T, H] or undefined: the shared expert's output
  Tensor shared_gate;         // [T, G] f32 or undefined: the shared expert's gate logit in column 0
  Tensor act_scratch;         // [T k, I]: the (token, slot) pairs' activations
  Tensor pair_out;            // [T k, H] f32: the pairs' weighted outputs
  Tensor index;               // [moe_index_elems(T, k, E)] i32
  Tensor out;                 // [T, H]
  Tensor gate_up_bias;        // [E, 2I] or undefined: expert e's gate biases, then its up biases
  Tensor down_bias;           // [E, H] or undefined
  Tensor workspace;           // U8 [Backend::moe_workspace_bytes] or undefined: none
  // Where set, the residual add and norm after the block: then.residual += out, then.out =
  // rms_norm(then.residual) * then.weight (eps), as add_rms_norm does; where the backend hands the
  // norm off (Backend::moe_norm_handoff), out and then.out hold what the next projection with that
  // norm reads instead (out may be left unwritten).
  std::optional<AddRmsNorm> then;
  // The experts the routing picks from: all ranks' under expert parallelism, whose pairs are then
  // E / routed_experts of ids' on average (the kernels' choice of path and work item size); 0: E.
  int64_t routed_experts = 0;
};

// Throws unless src [rows, w] fits the leading columns of dst [rows, W] (same dtype, w <= W).
void check_leading_columns(const Tensor& dst, const Tensor& src);

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  virtual std::string name() const = 0;  // "cpu", "cuda"
  virtual DType compute_dtype() const = 0;
  virtual Allocator& allocator() = 0;
  virtual Stream& stream() = 0;

  // Memory. copy() works between host and this device in either direction (async on the
  // device; a host destination is valid after stream().synchronize()).
  virtual void copy(const Tensor& dst, const Tensor& src) = 0;
  // src [rows, w] into the first w columns of dst [rows, W >= w] (the step's block table into its
  // persistent buffer: a few columns, not the max_model_len-wide rows). Either side may be host.
  virtual void copy_leading_columns(const Tensor& dst, const Tensor& src) = 0;
  // Host float data of any float dtype -> a new tensor on this device in `dtype` (setup time).
  virtual Tensor upload(const void* host, DType host_dtype, const Shape& shape, DType dtype) = 0;
  virtual void fill_zero(const Tensor& t) = 0;
  // dst's element i = f(i), a dummy weight (ops/dummy_fill.h), written in place. The default
  // computes host memory on the host's cores; a device backend computes its own memory (a
  // tensor of 8e9 elements takes the host tens of seconds).
  virtual void fill_dummy(const Tensor& dst, const DummyFill& f);

  // The residual stream (embedding's out, rms_norm's x, add_rms_norm's residual) may be F32
  // whatever the compute dtype: summing 2 L residual updates in bf16 costs ~1% of accuracy.
  // out[t, :] = table[ids[t], :]          ids [T] i32, table [V, H], out [T, H]
  virtual void embedding(const Tensor& ids, const Tensor& table, const Tensor& out) = 0;
  // Vocab-parallel embedding: out[t, :] = table[ids[t] - first, :] when that row is in the table,
  // else 0 (the ranks' outputs sum to the whole embedding). Same layouts as embedding().
  virtual void embedding_shard(const Tensor& ids, const Tensor& table, int64_t first, const Tensor& out) = 0;
  // out = x / rms(x) * w (per row)         x, out [T, H], w [H]
  virtual void rms_norm(const Tensor& x, const Tensor& w, float eps, const Tensor& out) = 0;
  // residual += x; out = rms_norm(residual) (fused residual add + norm; x may alias out)
  virtual void add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& w, float eps, const Tensor& out) = 0;
  // y = x w^T (+ bias)                     x [T, K], w [N, K], bias [N] or undefined, y [T, N]
  // y may be F32 while x, w are compute_dtype (logits).
  virtual void linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y) = 0;
  // Fused QKV epilogue: splits qkv [T, (Hq + 2 Hkv) * D] (one fused projection's output, heads
  // in q, k, v order) into contiguous q [T, Hq * D], k, v [T, Hkv * D]; when q_norm and k_norm
  // are defined ([D] each, Qwen3) applies per-head RMSNorm (eps) to q and k; then RoPE to q and
  // k at positions [T] (rotate-half RoPE), in one kernel.
  // D = cfg.head_dim; Hq and Hkv are q's and k's widths over D.
  virtual void split_qkv_rope(const Tensor& qkv, const Tensor& positions, const RopeConfig& cfg, const Tensor& q_norm,
                              const Tensor& k_norm, float eps, const Tensor& q, const Tensor& k, const Tensor& v) = 0;
  // out = act(gate) * up                  gate_up [T, 2I] (gate first), out [T, I]
  virtual void gated_activation(GatedActivation act, const Tensor& gate_up, const Tensor& out) = 0;

  // One projection with what it is fused with (ops/linear_op.h): the norm before it, the GEMM,
  // the op after it. This default runs them one after the other; a backend overrides it to fuse
  // (the QKV GEMV with its split + RoPE, the gate/up GEMV with the activation, the norm computed
  // while the weight streams).
  virtual void linear(const LinearOp& op);
  // The op `then` names, on y (nothing for std::monostate).
  void apply_epilogue(const Tensor& y, const LinearEpilogue& then);

  // Decode's deferred norm: where defers_norm(T) is true the model lets the projection before a
  // residual add + norm do the add (a LinearOp whose AddRmsNorm may leave out unwritten) and the
  // projection after it compute the norm from the residual (a LinearOp with RmsNormInput), saving
  // the norm's launch.
  virtual bool defers_norm(int64_t tokens) const {
    (void)tokens;
    return false;
  }
  // Whether moe_experts does MoeExpertsArgs::then's add with the norm handed to the next
  // projection (a LinearOp with RmsNormInput {then.residual, then.weight, then.eps} and x =
  // then.out) at `tokens` tokens of hidden size `hidden`, saving the add + norm's launch; the
  // model asks for `then` only where this says so.
  virtual bool moe_norm_handoff(int64_t tokens, int64_t hidden) const {
    (void)tokens, (void)hidden;
    return false;
  }
  // Whether the next layer's QKV projection on `qkv_w` at `tokens` tokens (with Qwen3's q / k norm
  // of head dim head_norm_dim; 0: none) reads such a handoff as its norm; the model hands the norm
  // off only where both hold.
  virtual bool reads_norm_handoff(const Tensor& qkv_w, int64_t tokens, int head_norm_dim) const {
    (void)tokens, (void)head_norm_dim;
    return qkv_w.dtype() == compute_dtype();
  }

  // Whether linear(op) takes op's AddRmsNorm::peer_sum itself (the partial sums of the ranks added
  // by the projection, ops/peer_sum.h); the model sets peer_sum only where this holds, and else runs
  // the projection and then Communicator::all_reduce_add_rms_norm.
  virtual bool folds_peer_sum(const LinearOp& op) const {
    (void)op;
    return false;
  }

  // In place: x *= alpha (x f32 or compute dtype; Gemma's embedding scale on the residual)
  virtual void scale(const Tensor& x, float alpha) = 0;
  // In place: x = cap * tanh(x / cap) (logit soft-capping; x f32 or compute dtype)
  virtual void softcap(const Tensor& x, float cap) = 0;
  // out[i, :] = x[idx[i], :]               idx [n] i32, x [T, H], out [n, H]
  virtual void gather_rows(const Tensor& x, const Tensor& idx, const Tensor& out) = 0;

  // Batched LoRA (punica style), one adapter slot per token: y[t, :] += (x[t, :] a[s]^T) bt[s]
  // with s = slots[t]; rows whose slot is < 0 (the base model, padding) are left untouched. Slot
  // contents may change between graph replays. x [T, K], a [S, R, K], bt [S, R, N] (B^T, scale
  // folded in), slots [T] i32, y [T, N]; tmp [T, R] f32 holds the rank-R intermediate; parts
  // says which blocks of bt are zero.
  // lora_shrink: tmp = x a[s]^T. The backend may run it beside the ops enqueued after it (the
  // base projection: it needs only x), up to the next lora_expand, which waits for it: until
  // then nothing may write x or tmp. Every lora_shrink is followed by a lora_expand.
  virtual void lora_shrink(const Tensor& x, const Tensor& a, const Tensor& slots, const Tensor& tmp) = 0;
  // lora_expand: y += tmp bt[s].
  virtual void lora_expand(const Tensor& tmp, const Tensor& bt, const Tensor& slots, const Tensor& y,
                           const LoraParts& parts) = 0;
  // lora_expand, then the op that consumes y (ops/linear_op.h's epilogues; a backend may run both
  // as one kernel): the split + RoPE after qkv (parts q, k, v), the gated activation after
  // gate_up (parts gate, up), the residual add + RMSNorm after o or down (one target; its out
  // may alias y). y's contents are unspecified afterwards.
  virtual void lora_expand(const Tensor& tmp, const Tensor& bt, const Tensor& slots, const Tensor& y,
                           const LoraParts& parts, const LinearEpilogue& then) {
    lora_expand(tmp, bt, slots, y, parts);
    apply_epilogue(y, then);
  }
  // The stacked shrink: with every slot's A rows stacked under the base weight ([N + P, K],
  // P = lora_stacked_width(S, R), LoraSlots), the base GEMM also computes x a[s]^T of every slot
  // s: y [T, N + P] holds x W^T in columns [0, N) and slot s's shrink in [N + s R, N + (s + 1) R),
  // in f32 (as lora_shrink's tmp). The fused expands take that y with tmp undefined (no
  // lora_shrink ran) where lora_stacked(shape) is true; the add + norm then writes out [T, N]
  // (not aliasing y). Backends without this form return false: the model runs lora_shrink.
  virtual bool lora_stacked(const LoraFusedShape& shape) const {
    (void)shape;
    return false;
  }
  // Both, one after the other.
  void lora_apply(const Tensor& x, const Tensor& a, const Tensor& bt, const Tensor& slots, const Tensor& tmp,
                  const Tensor& y, const LoraParts& parts) {
    lora_shrink(x, a, slots, tmp);
    lora_expand(tmp, bt, slots, y, parts);
  }

  // Mixture of experts (ops/moe.h). moe_route: the router's logits [T, E] f32 and bias [E] f32
  // (or undefined) -> ids [T, k] i32 and weights [T, k] f32, by the rule `r` (local ids and
  // kMoeOtherRank under expert parallelism).
  virtual void moe_route(const Tensor& logits, const Tensor& bias, const MoeRouting& r, const Tensor& ids,
                         const Tensor& weights) = 0;
  // The routed experts of every token (MoeExpertsArgs), reading only the experts some token
  // selected; no host synchronisation, so it runs inside graphs.
  virtual void moe_experts(const MoeExpertsArgs& a) = 0;
  // The kernels moe_experts runs (for the start-up log).
  virtual std::string moe_kernels() const { return "reference"; }
  // Bytes of MoeExpertsArgs::workspace moe_experts can use for batches of up to T tokens, k of E
  // experts of width I each, hidden size H (the CUDA backend's dense form), the routing picking
  // from `routed` experts (MoeExpertsArgs::routed_experts, but never 0); 0: it uses none.
  virtual int64_t moe_workspace_bytes(int64_t T, int64_t k, int64_t E, int64_t I, int64_t H, int64_t routed) const {
    (void)T, (void)k, (void)E, (void)I, (void)H, (void)routed;
    return 0;
  }
  // FP8 e4m3 projection weights (model/quant_config.h). fp8_weights(): linear() and its fused
  // forms take F8E4M3 weights carrying their scales (Tensor::scales, ops/fp8_weights.h); a backend
  // without FP8 kernels keeps them in the compute dtype, holding FP8's exact dequantization.
  virtual bool fp8_weights() const { return false; }
  // The kernels FP8 weights run with here (the start-up log).
  virtual std::string fp8_kernels() const { return "none: weights dequantized to the compute dtype at load"; }
  // Quantizes src [r, K] (a float weight, or rows of one) to e4m3 with one scale, amax / 448, per
  // group of group_rows rows (from src's first row) by K columns (by 128 columns when block128).
  // Where fp8_weights(), into dst (F8E4M3 [r, K] with scales [r, 1] or [r, ceil(K / 128)], each
  // row holding its group's scale); otherwise dst (compute dtype; may be src) gets the values the
  // FP8 weight stands for (q * scale), the reference of what FP8 kernels compute. Setup time.
  virtual void quantize_fp8(const Tensor& src, int64_t group_rows, bool block128, const Tensor& dst) = 0;

  // Start-up GEMM autotuning (docs/CUDA_GRAPHS.md §9): for every GEMM shape the ops have run so
  // far (the warm-up) and every token count of opts.sizes, time the library's candidate
  // algorithms and keep the fastest for later calls of that exact shape, through the cache.
  // Not while capturing. Backends without a choice of algorithms do nothing.
  virtual GemmTuningReport tune_gemms(const GemmTuningOptions& opts) {
    (void)opts;
    return {};
  }

  // The whole decode step of `m` as one op (ops/decode_step.h), or null with the reason in *why:
  // the backend has none (the CPU's), its kernel does not cover `m`, or its options turn it off.
  // Setup time, never while capturing.
  virtual std::unique_ptr<DecodeStep> make_decode_step(const DecodeStepModel& m, std::string* why) {
    (void)m;
    if (why) *why = "the " + name() + " backend has no decode-step kernel";
    return nullptr;
  }
};

// The CPU backend (fp32 reference). Always available.
std::unique_ptr<Backend> make_cpu_backend();

}  // namespace gs
