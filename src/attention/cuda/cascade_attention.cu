// Implements attention/cuda/cascade_attention.h: the split count of the prefix pass, the three
// launches, and the merge kernel.
#include <algorithm>

#include "attention/cuda/cascade_attention.h"
#include "attention/cuda/decode_attention.h"
#include "attention/cuda/prefill_attention.h"
#include "attention/cuda/tensor_core_split.cuh"

namespace gs::cuda {

namespace {

constexpr int kMergeThreads = 256;

int cdiv(int a, int b) { return (a + b - 1) / b; }

// One (token, head) row per D / 4 threads, four elements each: out = sum_s w_s o_s / sum_s w_s over
// the row's slots, w_s = l_s 2^(m_s - max m) (slots with l_s = 0 weigh nothing); rows of tokens past
// query_start_loc[num_reqs_padded] are zeros.
template <int D>
__global__ void __launch_bounds__(kMergeThreads) cascade_merge_kernel(PagedAttentionParams p, int T) {
  constexpr int kThreadsPerRow = D / 4;
  const int64_t row = int64_t(blockIdx.x) * (kMergeThreads / kThreadsPerRow) + threadIdx.x / kThreadsPerRow;
  if (row >= int64_t(T) * p.hq) return;
  const int c = int(threadIdx.x % kThreadsPerRow) * 4;
  uint2* dst = reinterpret_cast<uint2*>(static_cast<uint16_t*>(p.out) + row * D + c);
  if (row / p.hq >= p.query_start_loc[p.num_reqs_padded]) {
    *dst = make_uint2(0u, 0u);
    return;
  }
  const tensor_core::SplitWorkspace ws = tensor_core::cascade_partials(p, T);
  const int64_t part0 = row * ws.slots;
  float mx = -INFINITY;
  for (int sl = 0; sl < ws.slots; ++sl)
    if (ws.ml[2 * (part0 + sl) + 1] > 0.0f) mx = fmaxf(mx, ws.ml[2 * (part0 + sl)]);
  float den = 0.0f, acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int sl = 0; sl < ws.slots; ++sl) {
    const float l = ws.ml[2 * (part0 + sl) + 1];
    if (!(l > 0.0f)) continue;
    const float w = l * exp2f(ws.ml[2 * (part0 + sl)] - mx);
    // (8-byte loads: the o region starts 2 T hq slots floats in, a multiple of 2 only)
    const float2* o = reinterpret_cast<const float2*>(ws.o + (part0 + sl) * D + c);
    const float2 a = o[0], b = o[1];
    den += w;
    acc[0] += w * a.x, acc[1] += w * a.y, acc[2] += w * b.x, acc[3] += w * b.y;
  }
  const float inv = den > 0.0f ? 1.0f / den : 0.0f;
  *dst = make_uint2(tensor_core::pack_bf16(acc[0] * inv, acc[1] * inv),
                    tensor_core::pack_bf16(acc[2] * inv, acc[3] * inv));
}

cudaError_t cascade_merge(const PagedAttentionParams& p, int T, cudaStream_t s) {
  const int64_t rows = int64_t(T) * p.hq;
  const int rows_per_cta = kMergeThreads / (p.D / 4);
  const unsigned grid = unsigned((rows + rows_per_cta - 1) / rows_per_cta);
  if (p.D == 128)
    cascade_merge_kernel<128><<<grid, kMergeThreads, 0, s>>>(p, T);
  else
    cascade_merge_kernel<64><<<grid, kMergeThreads, 0, s>>>(p, T);
  return cudaGetLastError();
}

// Splits of the prefix pass: about o.cascade_split_target CTAs in all, each split at least
// o.cascade_split_min_tiles 64-key tiles, at most the workspace's slots less the suffix's one;
// rounded so that every split gets tiles (equal parts but the last).
int prefix_splits(const PagedAttentionParams& p, const AttentionKernelOptions& o, int prefix_len, int T) {
  const int tiles = cdiv(prefix_len, kDecodeTileKeys);
  const int ctas = cdiv(T, std::max(1, prefill_tile_rows(o, p.D) / (p.hq / p.hkv))) * p.hkv;
  const int slots = int(cascade_workspace_floats(p.hq, p.D) / (size_t(T) * p.hq * (p.D + 2)));
  const int want = std::min(
      {cdiv(std::max(1, o.cascade_split_target), ctas), tiles / std::max(1, o.cascade_split_min_tiles), slots - 1});
  const int splits = std::max(1, want);
  return cdiv(tiles, cdiv(tiles, splits));
}

}  // namespace

size_t cascade_workspace_floats(int hq, int D) { return size_t(2) * kCascadeMaxTokens * size_t(hq) * size_t(D + 2); }

cudaError_t cascade_attention(const PagedAttentionParams& p, const AttentionKernelOptions& o, AttentionKernel suffix,
                              int prefix_len, int T, float* workspace, cudaStream_t s) {
  if (T <= 0) return cudaGetLastError();
  if (T > kCascadeMaxTokens || prefix_len <= 0 || !workspace || !prefill_attention_supported(p))
    return cudaErrorInvalidValue;
  PagedAttentionParams c = p;
  const int splits = prefix_splits(p, o, prefix_len, T);
  c.cascade_prefix_len = prefix_len;
  c.cascade_partials = workspace;
  c.cascade_slots = splits + 1;
  c.cascade_pass = kCascadePrefix;
  if (const cudaError_t e = cascade_prefix_attention(c, o, T, splits, s); e != cudaSuccess) return e;
  c.cascade_pass = kCascadeSuffix;
  cudaError_t e = cudaErrorInvalidValue;
  if (suffix == AttentionKernel::TensorCorePrefill) e = prefill_attention(c, o, -1, T, s);
  if (suffix == AttentionKernel::TensorCoreDecode) e = tensor_core_decode_attention(c, o, -1, T, s);
  if (e != cudaSuccess) return e;
  return cascade_merge(c, T, s);
}

}  // namespace gs::cuda
