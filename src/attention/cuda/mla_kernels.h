// The CUDA kernels of multi-head latent attention (attention/mla_attention.h): the absorbed form,
// bf16 attending on tensor cores (MlaLaunch::tensor_core), f32 on CUDA cores, and for long
// queries of eager bf16 steps the expanded form (MlaExpandedLaunch). Each absorbed kernel reads
// the batch from the metadata's device buffers and sizes its grid from the padded token count, so
// one launch sequence serves any batch of that shape inside a graph; scratch is the caller's,
// fixed-size. A batch of few tokens splits each token's context over `splits` CTAs (mla_splits)
// in either attend kernel, whose partial results merge_kernel combines before expand.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/gated_activation.h"  // GS_HOST_DEVICE

namespace gs::cuda {

struct MlaDims {
  int heads, kv_lora_rank, nope, rope, v;
  float scale, rope_scale;
  bool interleave;
  GS_HOST_DEVICE int latent() const { return kv_lora_rank + rope; }
};

// Pointers of one layer's launch; `Scalar` is the compute dtype's element (float, or uint16_t for bf16).
template <typename Scalar>
struct MlaLaunch {
  const Scalar* q;          // [T, H (nope + rope)]
  const Scalar* kv_a;       // [T, L + R]
  const Scalar* kv_a_norm;  // [L]
  const Scalar* kv_b;       // [H (nope + v), L]
  const int32_t* positions;
  const float* inv_freq;  // [R / 2]
  Scalar* cache;          // [blocks, block_size, L + R]; null where cache8 holds it
  Scalar* out;            // [T, H v]
  float* q_latent;        // scratch [T, H, L + R]
  float* o_latent;        // scratch [T, H, L] (splits 1)
  float* o_part;          // scratch [T, splits, H, L]: unnormalised partial outputs (splits > 1)
  float* ml_part;         // scratch [T, splits, H, 2]: their running max and sum (splits > 1)
  const int32_t* qsl;     // [num_reqs + 1]
  const int32_t* seq_lens;
  const int32_t* block_table;
  const int32_t* slots;
  int num_tokens, num_reqs, block_size, max_blocks, splits;
  float norm_eps;
  MlaDims d;
  // An e4m3 cache (--kv-cache-dtype fp8) instead of `cache`: a latent value x stored as
  // e4m3(x * (1 / cache_scale)) from its f32 value, read as e4m3 * cache_scale.
  uint8_t* cache8 = nullptr;
  float cache_scale = 1.0f;
  // attend on tensor cores (bf16 only): mla_attend_mma.cu.
  bool tensor_core = false;
  // Absorption's and W_UV's products are the caller's GEMMs (bf16 only; launches of many tokens,
  // where tensor-core GEMMs beat the register-tiled kernels): launch_mla_absorb then writes only
  // q_pe's rotation into q_latent (the GEMM fills the first L columns), and launch_mla_attend ends
  // with o_latent rounded to bf16 into q_latent's memory ([T, H, L], the expand GEMM's input)
  // instead of expand.
  bool gemms_apart = false;
};

// The most kv_lora_rank the attention kernel's per-thread accumulators hold.
constexpr int kMlaMaxLoraRank = 512;
// The most CTAs one token's context is split over, and the (token, split) rows the caller's
// o_part / ml_part scratch must hold.
constexpr int kMlaMaxSplits = 32;
constexpr int kMlaSplitRows = 256;

// The context split of a launch of `num_tokens` (padded) tokens: 1 once the tokens alone fill
// the `sm_count` multiprocessors twice, else enough splits to, within the two limits above.
int mla_splits(int num_tokens, int heads, int sm_count);

// The limits the launches hold: nope and rope at most 256, kv_lora_rank a multiple of 8 and at
// most kMlaMaxLoraRank.
bool mla_dims_supported(const MlaDims& d);
// Once per backend, before any launch (and before graph capture): the attention kernel's shared memory.
template <typename Scalar>
cudaError_t prepare_mla(const MlaDims& d);
// A layer's launches on `stream` (see mla_kernels.cu) in two parts, the caller's absorb GEMM
// between them and its expand GEMM after them where l.gemms_apart: latent and absorb; attend,
// merge and expand.
template <typename Scalar>
cudaError_t launch_mla_absorb(const MlaLaunch<Scalar>& l, cudaStream_t stream);
template <typename Scalar>
cudaError_t launch_mla_attend(const MlaLaunch<Scalar>& l, cudaStream_t stream);

// The tensor-core attend (mla_attend_mma.cu): whether it is built for these dims (DeepSeek-V2/V3's
// kv_lora_rank 512 + rope 64, and the kernel tests' 64 + 16); its shared memory, once per backend
// before any launch; and its launch, which writes every token's normalised o_latent rows.
bool mla_attend_mma_supported(const MlaDims& d);
cudaError_t prepare_mla_attend_mma(const MlaDims& d);
cudaError_t launch_mla_attend_mma(const MlaLaunch<uint16_t>& l, cudaStream_t stream);

// The expanded form (mla_expanded.cu) for requests of many queries, whose context is up-projected
// once instead of every query attending in the 576-wide latent space: their cached latent rows are
// gathered into `lat` (bf16; an e4m3 cache widened and scaled), the caller's GEMM of lat by kv_b
// fills `kv` with each context row's k_nope and v per head, and the attention kernel runs causal
// multi-head attention with head dims nope + rope (q_nope | rotated q_pe against k_nope | k_pe)
// and v, writing the requests' output rows. Built for DeepSeek-V2/V3's nope 128, rope 64, v 128.
struct MlaExpandedRequest {
  int row;    // its row of qsl, seq_lens and the block table
  int tok0;   // its first query token in the step
  int qlen;   // its queries (the last qlen positions of its context)
  int ctx;    // its context after this step: keys [0, ctx)
  int kv0;    // its first row of lat / kv
  int tile0;  // its first CTA (grid x) of the attention kernel
};
constexpr int kMlaMaxExpandedReqs = 16;  // requests of one launch (the caller loops over more)
// Query tokens of one attention CTA (and of one tile of MlaExpandedRequest::tile0's count).
constexpr int kMlaExpandedTileTokens = 64;

struct MlaExpandedLaunch {
  const uint16_t* q;      // [T, H (nope + rope)], q_pe not rotated
  const float* q_latent;  // [T, H, L + R]: q_pe rotated in the last R columns (launch_mla_absorb)
  const uint16_t* cache;  // [slots, L + R] bf16, or null where cache8 holds it
  const uint8_t* cache8;  // e4m3 (value = e4m3 * cache_scale), or null
  float cache_scale;
  const int32_t* block_table;
  int block_size, max_blocks;
  uint16_t* lat;  // scratch [rows, L + R]: the requests' context rows, gathered
  uint16_t* kv;   // scratch [rows, H (nope + v)]: lat's rows by kv_b (the caller's GEMM)
  uint16_t* out;  // [T, H v]
  MlaDims d;
  int num_reqs, num_tiles, max_ctx;
  MlaExpandedRequest req[kMlaMaxExpandedReqs];
};

bool mla_expanded_supported(const MlaDims& d);
// Once per backend, before any launch: the attention kernel's shared memory.
cudaError_t prepare_mla_expanded();
cudaError_t launch_mla_gather(const MlaExpandedLaunch& l, cudaStream_t stream);
cudaError_t launch_mla_expanded(const MlaExpandedLaunch& l, cudaStream_t stream);

}  // namespace gs::cuda
