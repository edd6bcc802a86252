// LoraSlots: the adapter weights on the device, in --max-loras fixed slots per fused projection
// (qkv, o, gate_up, down), and their application after the base projection.
//
// Each fused projection p of layer l holds a [S, R_p, K] (lora_A rows) and bt [S, R_p, N] (lora_B
// transposed, the adapter's scale folded in), R_p = max_rank times the number of PEFT targets
// fused into p (3 for qkv, 2 for gate_up): target c's rank rows sit at [c * max_rank, ...) and
// its B columns at its output rows, so one shrink and one expand compute every fused part.
// Unused rows are zero. A mixture-of-experts layer has no gate/up or down slots. Tensors are
// allocated once; loading an adapter overwrites a slot's contents, never an address, so captured
// graphs stay valid.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/lora_adapter.h"
#include "model/model_config.h"
#include "ops/backend.h"

namespace gs {

enum class LoraProj { Qkv, O, GateUp, Down };
inline constexpr int kNumLoraProjs = 4;

// An adapter laid out as one slot's contents, in the compute dtype, in host memory: what a
// swap copies to the device (prepared once, when the adapter is read).
struct LoraSlotImage {
  std::string name;
  std::string path;  // the PEFT directory it was read from (read again once the host cache drops it)
  std::vector<std::vector<uint8_t>> parts;  // per layer, per projection: a, then bt
};

class LoraSlots {
 public:
  // `cfg`: the shapes of the projections the slots adapt, this tensor-parallel rank's
  // (TpLayout::local); the adapters they take are sharded alike (shard_lora_adapter).
  LoraSlots(const ModelConfig& cfg, Backend& backend, int max_loras, int max_rank, int max_num_tokens);

  int num_slots() const { return max_loras_; }
  int max_rank() const { return max_rank_; }
  // The slot contents of `adapter` (fused, zero-padded, scale folded into B, compute dtype).
  LoraSlotImage prepare(const LoraAdapter& adapter) const;
  // Copies an image into `slot` (host -> device; returns once the copies are done).
  void load(int slot, const LoraSlotImage& image);
  void load(int slot, const LoraAdapter& adapter) { load(slot, prepare(adapter)); }
  // y[:n] += LoRA(x[:n]) for the tokens whose slots[t] >= 0 (slots: i32 [>= n]), in two steps:
  // shrink (x A^T into the scratch) before the base projection, which it may run beside (it
  // needs only x), and expand (+ scratch B^T into y) after it, with the op that consumes y
  // (Backend::lora_expand's epilogue: the split + RoPE after qkv, the gated activation after
  // gate_up, the residual add + RMSNorm after o or down). One shrink, then its expand. After
  // project(), y is what project() returned.
  void shrink(int layer, LoraProj p, const Tensor& x, const Tensor& slots, int n);
  void expand(int layer, LoraProj p, const Tensor& y, const Tensor& slots, int n, const LinearEpilogue& then);

  // The stacked shrink (Backend::lora_stacked): moves the base weight w [N, K] of projection p
  // (and its bias, if any) into a new [N + P, K] allocation whose rows after N are this
  // projection's slots (a), so that one GEMM computes the projection and every slot's shrink;
  // w (bias) then views the first N rows. Nothing is moved where the backend never takes the
  // stacked form, the slot rows would add more than kMaxStackedBytes to each GEMM, or w is FP8
  // (e4m3 with scales: the slots are in the compute dtype). Once per layer and projection, when
  // the model binds the slots (before capture).
  void stack_under(int layer, LoraProj p, Tensor& w, Tensor& bias);
  // The base projection of x [n, K] into y [n, N] with the adapters' shrink, for the fused expand
  // `op` after it (none: the plain expand): lora_shrink then linear(x, w, bias, y), or one linear
  // over the stacked weight into a wider f32 scratch. Returns what the expand takes as its y.
  Tensor project(int layer, LoraProj p, std::optional<LoraFusedOp> op, const Tensor& x, const Tensor& w,
                 const Tensor& bias, const Tensor& y, const Tensor& slots, int n);

 private:
  struct Proj {
    Tensor a, bt;                    // [S, R, K], [S, R, N]
    LoraParts parts;                 // the fused targets' columns of y (bt is block-diagonal over them)
    Tensor stacked_w, stacked_bias;  // [N + P, K] (a views its rows from N), [N + P]; or undefined
  };
  // Whether projection p of `layer` has slots: not a mixture-of-experts layer's gate/up or down
  // (experts take no adapters).
  bool has_slots(int layer, LoraProj p) const;
  // Whether the fused op's shape at n tokens takes the stacked shrink.
  bool stacked(const Proj& w, LoraFusedOp op, int n) const;
  // Tmp for the expand after project(): lora_shrink's, or undefined (stacked: y holds it).
  Tensor tmp_for(const Proj& w, const Tensor& y, int n) const;
  LoraFusedShape fused_shape(const Proj& w, LoraFusedOp op, int n) const;
  // f32: the widest stacked output the backend takes (stacked_out_elems_), allocated with the first
  // projection stacked (none on FP8 bases).
  Tensor stacked_out_;
  int64_t stacked_out_elems_ = 0;
  // The stacked rows cost their bytes in every GEMM of the projection, whichever adapters a step
  // uses, while a separate shrink kernel costs a fixed launch in the decode chain, worth a few MB
  // of GEMM reads. So a projection is stacked only up to this many bytes of slot rows (8 rank-16
  // slots on llama3.2-1b are stacked; 16 rank-64 slots mostly are not; docs/PERF.md, Multi-LoRA).
  static constexpr int64_t kMaxStackedBytes = int64_t(4) << 20;
  std::array<bool, kNumLoraProjs> stackable_{};
  ModelConfig cfg_;
  Backend& be_;
  int max_loras_, max_rank_;
  std::vector<std::array<Proj, kNumLoraProjs>> layers_;
  Tensor tmp(const Proj& w, int n) const { return scratch_.prefix({n, w.a.dim(1)}); }  // [n, R] of scratch_
  Tensor scratch_;  // f32, max_num_tokens * 3 * max_rank: the rank-R intermediate, viewed [n, R]
};

}  // namespace gs
