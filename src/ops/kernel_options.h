// KernelOptions: which kernel variant the CUDA backends run, as typed values. Built once (the
// defaults below are the production choice), passed by value to the backend, attention backend and
// communicator at construction, and never read from the environment. Tests set fields to reach the
// other variants; docs/PERF.md records why each default is what it is. A field added here is also
// named in executor/wire.cpp's lists, which carry the options to tensor-parallel worker processes.
#pragma once
#include <cstdint>
#include <limits>

namespace gs {

// Attention kernels (src/attention/attention_kernel_selection.h decides which one runs a launch).
struct AttentionKernelOptions {
  // The tensor-core kernels at all: false keeps every launch on the flash-decoding kernel.
  bool tensor_core = true;
  // Decode batches (short queries) on the tensor-core kernels; false: on flash-decoding.
  bool tensor_core_decode = true;
  // Single-token decode on the keys-as-rows kernel (decode_keys_as_rows.cuh) where it applies.
  bool keys_as_rows_decode = true;
  // The keys-as-rows kernel loads the metadata and the cache rows of earlier positions before it waits
  // for the previous kernel (no kernel of the step writes them); false: everything after the wait.
  bool keys_as_rows_early_loads = true;
  // Where a head-dim-128 keys-as-rows launch's working CTAs fit two an SM (small batches), each
  // keeps three K/V stages (96 KB) instead of two (64 KB, three CTAs an SM), so a split's first 192
  // keys load before that wait.
  bool keys_as_rows_deep_stages = true;
  // Decode batches of at least this many (request, kv head) pairs at head dim 128 and a GQA group
  // of at most 2 run the warp-per-pair kernel (decode_warp_per_pair.cuh); 0: never ...
  int warp_per_pair_min_pairs = 512;
  // ... and fewer than this many (0: no upper limit): wider batches run keys-as-rows, which streams
  // their contexts faster from 512 tokens on.
  int warp_per_pair_max_pairs = 768;
  // Warps a (request, kv head) pair in that kernel: 1, 2 or 4; 0: from the padded shape.
  int warps_per_pair = 0;
  // Prefill at head dim 64 on Hopper's wgmma; false: on mma.sync.
  bool prefill_wgmma = true;
  // m16 tiles a warp of the mma.sync prefill kernel at head dim 64 (1 or 2; head dim 128 keeps 1).
  int prefill_tiles_per_warp_d64 = 2;
  // Decode splits each context so that about this many CTAs run in all; 0: as many as the GPU
  // holds at once of the kernel the launch takes (one wave: more would queue a second, fewer leave
  // SMs idle) ...
  int decode_split_target = 0;
  // ... each split holding at least this many 64-key tiles of the actual context ...
  int decode_split_min_tiles = 2;
  // ... and a long context split further, so that no split holds more than this many (0: no limit).
  int decode_split_max_tiles = 32;
  // Decode tiles whose rows fit one warp share their K/V tiles among the CTA's warps.
  bool decode_warp_split = true;
  // The tile search reads query_start_loc from shared memory (one parallel load).
  bool stage_query_starts = true;
  // The head-dim-64 tensor-core decode kernel is register-capped so that four CTAs fit an SM.
  bool decode_four_ctas_per_sm = true;
  // Cascade attention's prefix pass splits the shared prefix so that about this many CTAs run in
  // all ...
  int cascade_split_target = 264;
  // ... each split holding at least this many 64-key tiles.
  int cascade_split_min_tiles = 4;
};

// Fused epilogues of the linear ops (ops/cuda/cuda_backend.cpp).
struct LinearKernelOptions {
  // One-token and skinny decode linears with their split / RoPE / gated epilogues (the fused ops).
  bool decode_fusion = true;
  // The skinny tensor-core GEMM's gated and RoPE epilogues (needs decode_fusion).
  bool skinny_fusion = true;
  // The next layer's RMSNorm computed inside its GEMV (Backend::defers_norm; needs decode_fusion).
  bool norm_fusion = true;
  // With it, at one token on a hidden size K in [norm_handoff_min_k, norm_handoff_max_k]: the
  // o_proj / down GEMV that adds into the residual also stores x = residual * norm_w (rounded to
  // the compute dtype) for the gate|up or QKV GEMV right after it, which reads that x and only the
  // residual's squares instead of norming the residual in every warp (cuda::GemvInput::handoff).
  // Below the window the extra loads and barrier cost more than the norm; above it the norm in the
  // GEMV's main loop is already free and the handoff only adds to the producer (docs/PERF.md,
  // "Linear layers"). max 0: never.
  int norm_handoff_min_k = 768;
  int norm_handoff_max_k = 2048;
  // Qwen3's per-head q / k norm inside the QKV GEMV.
  bool qk_norm_fusion = true;
  // The one-token QKV + RoPE GEMV (no q / k norm, K >= 1024) in blocks of 16 warps, or 32 where 16
  // make more blocks than this percentage of the SMs' count (one block an SM, one wave), instead of
  // 4-warp blocks with K split over many waves: the SMs it leaves free start attention's CTAs under
  // it, which load their K/V stages before the QKV ends (docs/PERF.md, "Linear layers"). 0, or
  // neither block size: the split-K launch.
  int qkv_wide_sm_percent = 75;
};

// The LoRA kernels (ops/cuda/cuda_lora_ops.h).
struct LoraKernelOptions {
  // Batches of at most this many tokens run the shrink on a side stream beside the base GEMV (beside
  // a larger batch's GEMM it only competes for the GPU).
  int64_t fork_up_to_tokens = 1;
  // The fused expand ops run one kernel below this many tokens (and from 2).
  int64_t fuse_below_tokens = std::numeric_limits<int64_t>::max();
  // Decode batches take the shrink stacked into the base GEMM where the fused op allows it.
  bool stacked_shrink = true;
};

// The tensor-parallel all-reduce (distributed/cuda).
struct AllReduceKernelOptions {
  // The fused all-reduce + residual add + RMSNorm for rows that fit the custom kernel.
  bool fuse_add_rms_norm = true;
  // That kernel flagless (Lamport sentinels in the data); false: with a barrier between ranks.
  bool lamport = true;
  // At one token (with both of the above), the row-parallel o_proj / down GEMV pushes its partial
  // outputs to the peers and its last block adds and norms their sum (AddRmsNorm::peer_sum): no
  // all-reduce kernel between the projection and the next one. Off by default (the command line's
  // --all-reduce-in-projection turns it on) until it has run on two GPUs: its kernels are checked
  // on one (PeerSum.* tests), the two-GPU test and timings are docs/PERF.md's open item.
  bool in_projection = false;
};

// The fused MoE kernels (ops/cuda/moe_kernels.h).
struct MoeKernelOptions {
  // f32 experts (grouped GEMVs): (token, expert) pairs a warp computes a read of a weight row: 1, 2, 4, 8.
  int tokens_per_pass = 8;
  // bf16 experts of at most this many tokens (one token always; more where their pairs are
  // unlikely to share an expert: 4 T k <= E) take the small-batch path: each (token, expert)
  // pair is a work item read straight from the routing (no moe_align), and the down GEMM's last
  // CTA of each column tile sums a token's k pairs and the shared expert (no moe_reduce); the
  // same arithmetic as the sorted path, so the same output. 0: never.
  int direct_max_tokens = 4;
  // bf16 batches of at most dense_max_tokens tokens run every expert on every token (the dense
  // form) where each expert gets many pairs (T k >= dense_min_pairs_per_expert E) and the experts
  // are few against the experts a token (E <= dense_max_work_ratio k): gate_up as one cuBLASLt
  // GEMM over all experts' rows, the activation of the selected pairs only, down as a strided
  // batched GEMM, then each token's selected rows summed with their weights. That is E / k times
  // the grouped GEMMs' multiply-adds, but cuBLASLt streams the weights near the memory's speed
  // at these sizes, where the grouped GEMMs, at many pairs an expert, stream them slowest
  // (docs/PERF.md, "MoE dense form"). dense_max_tokens 0: never.
  int dense_max_tokens = 256;
  int dense_min_pairs_per_expert = 16;
  int dense_max_work_ratio = 8;
};

// FP8 e4m3 weights (ops/cuda/fp8_linear.h).
struct Fp8KernelOptions {
  // Weights up to this many tokens: the skinny tensor-core kernel on weights widened to bf16 in
  // registers, with the decode epilogues fused (ops/cuda/skinny_gemm.h; at most cuda::kSkinnyMaxM,
  // and cuda::kFp8BlockSkinnyMaxM on 128x128 block scales); 0: never.
  int skinny_max_tokens = 16;
  // Otherwise the CUDA-core FP8 GEMV up to this many tokens (at most cuda::kFp8GemvMaxM).
  int gemv_max_tokens = 8;
  // Qwen3's q / k head norm in the skinny kernel's RoPE epilogue (each head's CTAs a thread-block
  // cluster) up to this many tokens (at most cuda::kSkinnyHeadNormMaxM) on weights of K at least
  // head_norm_min_k; elsewhere the projection, then split_qkv_rope, is faster: on a short K the
  // cluster's barriers cost more than the kernel they save (docs/PERF.md). 0: never.
  int head_norm_max_tokens = 8;
  int head_norm_min_k = 4096;
  // Below head_norm_min_k, at one token: Qwen3's QKV with the q / k head norm and RoPE on the FP8
  // GEMV (cuda::gemv_fp8_qkv_rope_head_norm: the bf16 head-norm GEMV's blocks and clusters on e4m3
  // rows, whole-row or 128x128 block scales) instead of the skinny kernel then split_qkv_rope; from
  // head_norm_min_k the skinny kernel's cluster is faster (docs/PERF.md, "FP8 weights"). false: never.
  bool head_norm_gemv = true;
  // Above it: cuBLASLt's FP8 GEMM where it has one for the shape; false: always dequantize to bf16.
  bool lt_fp8_gemm = true;
  // 128x128 block-scaled weights whose 128-row tiles leave SMs idle, up to 64 tokens: cuBLASLt's
  // block-scaled GEMM with K split over them (ops/cuda/fp8_lt_gemm.h).
  bool lt_block_split_k = true;
  // cuBLASLt's FP8 GEMM on whole-row-scaled weights sums in the FP8 tensor cores' own accumulator
  // (CUBLASLT_MATMUL_DESC_FAST_ACCUM), as vLLM's CUTLASS FP8 kernels on Hopper do; false: partial
  // sums promoted to f32 along K. Block-scaled weights always promote (their scales apply per K block).
  bool lt_fast_accum = true;
  // Rows of x quantized at once (the scratch); larger M runs in chunks.
  int lt_max_rows = 8192;
  // The cuBLASLt product's scales and bias applied by the op that consumes it (the RoPE split, the
  // gated activation, the residual add + norm) as it reads each chunk; false: a pass of their own.
  bool lt_fused_epilogues = true;
  // Those ops' gated activation and residual add + norm also store their output quantized per
  // token (up to lt_max_rows tokens), which the next projection on whole-row-scaled weights reads
  // instead of quantizing its input again (ops/cuda/fp8_linear.h, the handoff); false: every
  // projection quantizes its own input.
  bool quantize_in_producer = true;
};

// The persistent decode kernel (ops/cuda/persistent_decode.h).
struct DecodeKernelOptions {
  // FULL graphs of uniform single-token decode steps of at most this many requests run the
  // whole step (embedding to final norm) as one persistent kernel where the model allows it
  // (ops/decode_step.h); at most cuda::kPersistentMaxTokens; 0: never. Off by default: the
  // layered path is faster at every shape measured so far (docs/PERF.md, "Persistent decode").
  int persistent_max_tokens = 0;
  // The kernel times its phases (work and hand-off of each, summed over its launches) and logs
  // their averages per kind when the model is destroyed (graphserve bench kernels sets it).
  bool trace_phases = false;
};

struct KernelOptions {
  AttentionKernelOptions attention;
  LinearKernelOptions linear;
  LoraKernelOptions lora;
  AllReduceKernelOptions all_reduce;
  MoeKernelOptions moe;
  Fp8KernelOptions fp8;
  DecodeKernelOptions decode;
};

}  // namespace gs
