// The cases of `graphserve bench ops` (bench/op_bench.h), on GPU 0 with random weights; each
// prints its table to stdout.
#pragma once

namespace gs::bench {

// Device-to-device copy of 1 GiB in a captured graph: ms and TB/s (read + write).
void time_copy_bandwidth();
// Backend::linear (GEMV, skinny GEMM or cuBLASLt) against plain cuBLASLt on the Llama-3.2-1B and
// Llama-3.1-8B projection shapes at 1..128 tokens, weights rotated so they never sit in L2.
void time_linear();
// Backend::linear on FP8 e4m3 weights (per-row scales, quantized on the GPU) beside bf16 on the same
// shapes at 1..128 tokens, per FP8 path: the default, the skinny FP8 kernel at every token count,
// and the CUDA-core FP8 GEMV then cuBLASLt's FP8 GEMM (Fp8KernelOptions).
void time_fp8_linear();
// FP8 projections with their epilogue op (RoPE split, gated activation, add + norm) on llama3.1-8b
// shapes at 256 / 2048 / 8192 tokens: the scales applied in that op against a pass of their own,
// beside bf16 and 128x128 block-scaled weights.
void time_fp8_epilogues();
// The ops of one Llama-3.2-1B decode step (16 layers, GQA 32/8, D 64, vocab 128256) in one captured
// graph at bs 1, 8, 32, 128: an estimate of the engine's FULL-graph decode step.
void time_decode_step();
// One attention layer of the Llama-3.2-1B shape (32 q heads, 8 kv heads) at head dim 64 and 128 over
// 2,048 and 8,192 prompt tokens: the tensor-core prefill kernel (at D 64 wgmma, and mma.sync), and
// the flash-decoding kernel at 2,048.
void time_prefill_attention();
// That layer at D 64 and 128 over an 8,192-token prompt in chunks of 1,024 / 2,048 / 4,096 / 8,192 new
// tokens, each chunk attending to the earlier ones in the paged cache.
void time_chunked_prefill_attention();
// One attention layer of the Llama-3.1-8B shape for decode batches whose requests share a prefix
// (64 requests over 4k shared + 256 own tokens, and others), with and without cascade attention.
void time_cascade_attention();
// One attention layer of 32 q / 8 kv heads at head dim 128 and 64 for decode batches of 1 / 32 / 128
// requests at 2k and 8k tokens, on a bf16 cache and on an e4m3 one.
void time_decode_attention();
// One decode attention layer at head dim 128 (8 kv heads, GQA 2 and 4) for 1..192 requests over
// 128..8,192 tokens, by the default selection and on each decode kernel that holds the shape.
void time_decode_kernels();
// The layer's cuBLASLt GEMMs (qkv, o, gate_up, down) at 2,048 and 8,192 tokens.
void time_prefill_gemms();
// The CUDA sampler (vocabulary 128,256) at 1 / 32 / 128 rows, greedy, temperature, top-p and
// top-k + top-p, on flat rows (a dummy-weight model's) and peaked ones (a trained model's).
void time_sampling();

}  // namespace gs::bench
