// The persistent decode kernel: one launch runs a whole decode step of a dense Llama-family model
// (bf16) for up to kPersistentMaxTokens single-token requests: the embedding, every layer and the
// final norm. Its CTAs (one per SM, all resident) hand each phase to the next through a grid
// barrier in device memory instead of kernel boundaries. In each CTA a producer warp streams the
// CTA's share of every GEMV phase's weight rows, in the order the phases run, into a ring of
// shared-memory stages (TMA bulk copies): the weights depend on nothing the step computes, so the
// stream runs on through the barriers and the attention phase as far as the ring reaches, and a
// GEMV phase finds its first stages already landed. Per layer:
//   A  qkv = rms_norm(residual) * input_norm . W_qkv (+ bias), rounded to bf16
//   B  attention: per (request, kv head, split of the context) task, the group's q heads and the
//      new k (Qwen3 q/k norm, RoPE at the token's position), the new k / v written to the paged
//      cache, online softmax over the split's keys; the splits of a (request, kv head) merged by
//      the last of them to finish (a counter per pair, left zeroed)
//   C  residual += attn_out . W_o
//   D  act = silu(gate) * up of rms_norm(residual) * post_norm . W_gate_up
//   E  residual += act . W_down
// then hidden = rms_norm(residual) * final_norm. Every value another CTA wrote is read after a
// barrier (acquire), never through the read-only path. The operations and their roundings are
// those of the layered path: every activation the layered kernels store in bf16 is rounded to
// bf16 here too; each GEMV output row is summed by one warp in a fixed order (the same bits every
// run).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace gs::cuda {

constexpr int kPersistentMaxTokens = 4;
// 15 consumer warps and the producer: 16 warps, so 128 registers a thread.
constexpr int kPersistentConsumerWarps = 15;
constexpr int kPersistentThreads = (kPersistentConsumerWarps + 1) * 32;
constexpr int kPersistentStageBytes = 16384;  // a stage of the weight ring
constexpr int kPersistentMaxStages = 16;
constexpr int kPersistentMaxSplits = 16;  // context splits of one (request, kv head) pair
constexpr int kPersistentMaxGroup = 8;    // query heads per kv head

// One layer's weights and KV cache (bf16), device pointers.
struct PersistentLayer {
  const uint16_t* input_norm;
  const uint16_t* qkv;       // [hq D + 2 hkv D, H]
  const uint16_t* qkv_bias;  // [hq D + 2 hkv D] or null
  const uint16_t* q_norm;    // [D] or null (Qwen3; with k_norm)
  const uint16_t* k_norm;
  const uint16_t* o_proj;  // [H, hq D]
  const uint16_t* post_norm;
  const uint16_t* gate_up;  // [2 I, H]
  const uint16_t* down;     // [H, I]
  uint16_t* k_cache;        // [num_blocks, block_size, hkv, D]
  uint16_t* v_cache;
};

struct PersistentDecodeParams {
  const PersistentLayer* layers = nullptr;  // device array
  int num_layers = 0;
  const uint16_t* embed = nullptr;  // [V, H]
  const uint16_t* final_norm = nullptr;
  const int32_t* ids = nullptr;           // [T]
  const int32_t* positions = nullptr;     // [T]
  const int32_t* slot_mapping = nullptr;  // [T]: < 0 or >= num_slots: not written (padding)
  const int32_t* seq_lens = nullptr;      // [T]: 0 for padding rows
  const int32_t* block_table = nullptr;   // [T, max_blocks_per_req]
  int T = 0;                              // tokens = requests (one each), 1..kPersistentMaxTokens
  int H = 0, I = 0, hq = 0, hkv = 0, D = 0;
  float eps = 0.0f, scale = 0.0f;
  const float* inv_freq = nullptr;  // rope_inv_freq's table
  int long_from = 0;
  int block_size = 0, max_blocks_per_req = 0;
  int64_t num_slots = 0;
  float* residual = nullptr;     // f32 [T, H]
  uint16_t* qkv = nullptr;       // [T, hq D + 2 hkv D]
  uint16_t* attn_out = nullptr;  // [T, hq D]
  uint16_t* act = nullptr;       // [T, I]
  uint16_t* hidden = nullptr;    // [T, H]: the final norm's output
  float* partials = nullptr;     // persistent_partials_floats(hq, D)
  unsigned* counters = nullptr;  // kPersistentMaxTokens * hkv, zeroed (left zeroed)
  unsigned* barrier = nullptr;   // 2, zeroed once (the arrival count and the launch's start)
  // The shared-memory plan (persistent_smem), and the ring stages the producer keeps issued and
  // not landed (1 .. ring_stages - 1).
  int ring_stages = 0, scratch_bytes = 0;
  int stages_in_flight = 1;
  // Null, or persistent_trace_words(num_layers) zeroed words where the kernel sums, over its
  // launches, each phase's work (from its start to the last CTA's arrival at the barrier after
  // it) and hand-off (to CTA 0 leaving that barrier), in ns: [B + 2 k] and [B + 2 k + 1] for
  // barrier k of B = persistent_barriers(num_layers) (the embedding, then A..E per layer), and
  // the launches counted in [3 B].
  unsigned long long* trace = nullptr;
};

inline int persistent_barriers(int num_layers) { return 1 + 5 * num_layers; }
inline int persistent_trace_words(int num_layers) { return 3 * persistent_barriers(num_layers) + 1; }

size_t persistent_partials_floats(int hq, int D);
// The dynamic shared memory of the kernel of M token rows for these shapes on `grid` CTAs: the
// scratch (x rows, or the attention phase's), the GEMV sums, and as many weight-ring stages as fit
// in `limit` bytes (the SM's opt-in maximum), at most kPersistentMaxStages; fewer than 2 stages:
// the kernel does not fit.
struct PersistentSmem {
  size_t bytes = 0;
  int stages = 0, scratch_bytes = 0;
};
PersistentSmem persistent_smem(int M, int H, int I, int hq, int hkv, int D, int grid, size_t limit);
// Whether the kernel handles these shapes (head dim 64 or 128, a group of at most
// kPersistentMaxGroup, widths multiple of 8).
bool persistent_shapes_supported(int H, int I, int hq, int hkv, int D);
// Sets the shared-memory limit of the kernel of M rows (before any capture) and returns in
// *blocks_per_sm how many of its CTAs an SM holds with `smem` (the grid needs 1).
cudaError_t persistent_decode_prepare(int M, int D, size_t smem, int* blocks_per_sm);
// Launches the step on `grid` CTAs (at most one per SM: every CTA must be resident; the launch
// is cooperative, so the driver guarantees it or refuses) with the instantiation of M >= p.T rows.
cudaError_t persistent_decode(const PersistentDecodeParams& p, int M, int grid, size_t smem, cudaStream_t s);

}  // namespace gs::cuda
