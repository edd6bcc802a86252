// The custom all-reduce's kernels (distributed/cuda/custom_all_reduce_kernels.h): the cross-GPU
// barrier, the one-shot / two-shot sums over the ranks' mapped buffers, and the one-shot sum
// fused with the residual add + RMSNorm after it.
#include <cuda_bf16.h>

#include <algorithm>
#include <type_traits>

#include "distributed/cuda/custom_all_reduce_kernels.h"
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/launch.cuh"

namespace gs::custom_ar {

namespace {

constexpr int kMaxThreads = 512;
enum Phase { kStart = 0, kMid = 1 };

__device__ __forceinline__ void store_release(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%1], %0;" ::"r"(v), "l"(p) : "memory");
}
__device__ __forceinline__ uint32_t load_acquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Block b of every rank meets here: thread r tells rank r this rank reached call `call`, then
// waits until rank r has reached it too (a peer may already be one call further: flags only
// grow). The block's earlier writes are released to the peers.
template <int World>
__device__ __forceinline__ void barrier(const PeerTable& t, int rank, Phase phase, uint32_t call) {
  __syncthreads();
  if (threadIdx.x < World) {
    store_release(&t.sig[threadIdx.x]->flags[phase][blockIdx.x][rank], call);
    const uint32_t* mine = &t.sig[rank]->flags[phase][blockIdx.x][threadIdx.x];
    while (int32_t(load_acquire(mine) - call) < 0) {}
  }
  __syncthreads();
}

// Rank r's data for call `call`: the half of its buffer that call's parity picks. A rank writes
// a half again two calls later, when every peer has finished the call that read it: the rank
// passed the previous call's start barrier, which every peer reaches only after its kernel of
// the call before has completed (stream order). So no end barrier is needed.
__device__ __forceinline__ uint4* data_of(const PeerTable& t, int r, uint32_t call) {
  return static_cast<uint4*>(t.data[r]) + (call & 1u) * t.half_packs;
}

template <typename T>
struct Pack {
  static constexpr int kElems = 16 / sizeof(T);
};
__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T>
__device__ __forceinline__ T from_f32(float v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else
    return __float2bfloat16_rn(v);
}

// The sum of the World packs v[0..World) in rank order, accumulated in f32.
template <typename T, int World>
__device__ __forceinline__ uint4 sum_packs(const uint4 (&v)[World]) {
  float acc[Pack<T>::kElems];
#pragma unroll
  for (int k = 0; k < Pack<T>::kElems; ++k) acc[k] = to_f32(reinterpret_cast<const T*>(&v[0])[k]);
#pragma unroll
  for (int r = 1; r < World; ++r)
#pragma unroll
    for (int k = 0; k < Pack<T>::kElems; ++k) acc[k] += to_f32(reinterpret_cast<const T*>(&v[r])[k]);
  uint4 out;
#pragma unroll
  for (int k = 0; k < Pack<T>::kElems; ++k) reinterpret_cast<T*>(&out)[k] = from_f32<T>(acc[k]);
  return out;
}

// The sum over ranks of pack i of call `call`'s data.
template <typename T, int World>
__device__ __forceinline__ uint4 sum_at(const PeerTable& t, uint32_t call, size_t i) {
  uint4 v[World];
#pragma unroll
  for (int r = 0; r < World; ++r) v[r] = data_of(t, r, call)[i];
  return sum_packs<T, World>(v);
}

// The call number of this block (the same on every rank: every call launches every block).
__device__ __forceinline__ uint32_t next_call(const PeerTable& t, int rank) {
  return t.sig[rank]->counter[blockIdx.x] + 1;
}
__device__ __forceinline__ void finish_call(const PeerTable& t, int rank, uint32_t call) {
  if (threadIdx.x == 0) t.sig[rank]->counter[blockIdx.x] = call;
}

// One-shot: each rank copies `in` into its buffer, then reads every rank's whole buffer and
// writes the sum to out (out may be in: a thread overwrites only the packs it copied itself).
template <typename T, int World>
__global__ void __launch_bounds__(kMaxThreads)
    one_shot_kernel(PeerTable t, int rank, const uint4* in, uint4* out, size_t packs) {
  const uint32_t call = next_call(t, rank);
  const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = size_t(gridDim.x) * blockDim.x;
  uint4* mine = data_of(t, rank, call);
  for (size_t i = first; i < packs; i += stride) mine[i] = in[i];
  barrier<World>(t, rank, kStart, call);
  for (size_t i = first; i < packs; i += stride) out[i] = sum_at<T, World>(t, call, i);
  finish_call(t, rank, call);
}

// Two-shot: rank r sums slice r of every buffer into its own buffer (reduce-scatter), then
// every rank copies slice s from rank s's buffer into out (all-gather). A thread touches the same
// offsets within the slices in every phase on every rank, so its block's barriers order them.
template <typename T, int World>
__global__ void __launch_bounds__(kMaxThreads)
    two_shot_kernel(PeerTable t, int rank, const uint4* in, uint4* out, size_t packs) {
  const uint32_t call = next_call(t, rank);
  const size_t part = (packs + World - 1) / World, stride = size_t(gridDim.x) * blockDim.x;
  const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  uint4* mine = data_of(t, rank, call);
  for (size_t i = first; i < part; i += stride)
#pragma unroll
    for (int s = 0; s < World; ++s)
      if (size_t(s) * part + i < packs) mine[size_t(s) * part + i] = in[size_t(s) * part + i];
  barrier<World>(t, rank, kStart, call);
  for (size_t i = first; i < part; i += stride) {
    const size_t at = size_t(rank) * part + i;
    if (at < packs) mine[at] = sum_at<T, World>(t, call, at);
  }
  barrier<World>(t, rank, kMid, call);
  for (size_t i = first; i < part; i += stride) {
    uint4 v[World];
#pragma unroll
    for (int r = 0; r < World; ++r)
      if (size_t(r) * part + i < packs) v[r] = data_of(t, r, call)[size_t(r) * part + i];
#pragma unroll
    for (int r = 0; r < World; ++r)
      if (size_t(r) * part + i < packs) out[size_t(r) * part + i] = v[r];
  }
  finish_call(t, rank, call);
}

// Every call launches all kMaxBlocks blocks (so every block's call number agrees across ranks
// and calls); the threads per block follow the message size.
template <typename T, int World>
void launch(AllReduceAlgo algo, const PeerTable& t, int rank, const uint4* in, uint4* out, size_t packs,
            cudaStream_t s) {
  const size_t work = algo == AllReduceAlgo::OneShot ? packs : (packs + World - 1) / World;
  const size_t per_block = (work + kMaxBlocks - 1) / kMaxBlocks;
  const int threads = int(std::clamp<size_t>((per_block + 31) / 32 * 32, 32, kMaxThreads));
  if (algo == AllReduceAlgo::OneShot)
    one_shot_kernel<T, World><<<kMaxBlocks, threads, 0, s>>>(t, rank, in, out, packs);
  else
    two_shot_kernel<T, World><<<kMaxBlocks, threads, 0, s>>>(t, rank, in, out, packs);
}

template <typename T>
cudaError_t launch_world(int world, AllReduceAlgo algo, const PeerTable& t, int rank, const uint4* in, uint4* out,
                         size_t packs, cudaStream_t s) {
  switch (world) {
    case 2: launch<T, 2>(algo, t, rank, in, out, packs, s); break;
    case 4: launch<T, 4>(algo, t, rank, in, out, packs, s); break;
    case 8: launch<T, 8>(algo, t, rank, in, out, packs, s); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

// The fused one-shot all-reduce + residual add + RMSNorm (launch_all_reduce_add_rms_norm). T is
// the element type of x, w and out as the CUDA backend's kernels name it (uint16_t: bf16, or
// float). Push, not pull: a block writes its rows of x into every rank's buffer (region `rank`
// of World regions of rows x hidden), meets the same block of every peer (the barrier's release
// orders those writes before its flag), then reads only its own buffer: one NVLink crossing per
// call instead of a crossing for the flag and a round trip for the data. Per row, thread t holds
// chunks t, t + blockDim.x, ... (8 elements each) of the summed row in registers, as the
// backend's vectorised add_rms_norm kernel does, so the sums and the block reduction happen in
// the same order.
constexpr int kNormChunks = 4;  // 8-element chunks per thread (hidden <= 8 * 4 * 1024)

template <typename T, int World>
__global__ void __launch_bounds__(1024)
    one_shot_add_rms_norm_kernel(PeerTable t, int rank, const T* x, float* residual, const T* w, float eps, T* out,
                                 int rows, int hidden) {
  using namespace gs::cuda;
  pdl_wait();
  const uint32_t call = next_call(t, rank);
  const int chunks = hidden / 8;
  const int64_t region = int64_t(rows) * hidden;  // elements of one rank's message
  for (int row = blockIdx.x; row < rows; row += gridDim.x)
    for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
      const int64_t at = int64_t(row) * hidden + c * 8;
      float v[8];
      load8(x + at, v);
#pragma unroll
      for (int p = 0; p < World; ++p) store8(reinterpret_cast<T*>(data_of(t, p, call)) + rank * region + at, v);
    }
  barrier<World>(t, rank, kStart, call);
  const T* mine = reinterpret_cast<const T*>(data_of(t, rank, call));
  pdl_trigger();
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = int64_t(row) * hidden;
    float v[kNormChunks][8];
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < kNormChunks; ++j) {
      const int e = (threadIdx.x + j * blockDim.x) * 8;
      if (e >= hidden) break;
      float sum[8], part[8], r[8];
      load8(mine + base + e, sum);
#pragma unroll
      for (int p = 1; p < World; ++p) {
        load8(mine + p * region + base + e, part);
#pragma unroll
        for (int i = 0; i < 8; ++i) sum[i] += part[i];
      }
      load8(residual + base + e, r);
#pragma unroll
      for (int i = 0; i < 8; ++i) r[i] = v[j][i] = r[i] + to_f(from_f<T>(sum[i]));
      store8(residual + base + e, r);
#pragma unroll
      for (int i = 0; i < 8; ++i) ss += v[j][i] * v[j][i];
    }
    const float inv = rsqrtf(block_sum(ss) / float(hidden) + eps);
#pragma unroll
    for (int j = 0; j < kNormChunks; ++j) {
      const int e = (threadIdx.x + j * blockDim.x) * 8;
      if (e >= hidden) break;
      float wf[8];
      load8(w + e, wf);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[j][i] *= inv * wf[i];
      store8(out + base + e, v[j]);
    }
  }
  finish_call(t, rank, call);
}

template <typename T, int World>
cudaError_t launch_fused(const PeerTable& t, int rank, const void* x, float* residual, const void* w, float eps,
                         void* out, int rows, int hidden, cudaStream_t s) {
  const int chunks = hidden / 8;
  const int threads = std::min(1024, (chunks + 31) / 32 * 32);  // the backend's add_rms_norm layout
  return gs::cuda::launch_pdl(one_shot_add_rms_norm_kernel<T, World>, dim3(kMaxBlocks), dim3(threads), 0, s, t, rank,
                              static_cast<const T*>(x), residual, static_cast<const T*>(w), eps, static_cast<T*>(out),
                              rows, hidden);
}

template <typename T>
cudaError_t launch_fused_world(int world, const PeerTable& t, int rank, const void* x, float* residual, const void* w,
                               float eps, void* out, int rows, int hidden, cudaStream_t s) {
  switch (world) {
    case 2: return launch_fused<T, 2>(t, rank, x, residual, w, eps, out, rows, hidden, s);
    case 4: return launch_fused<T, 4>(t, rank, x, residual, w, eps, out, rows, hidden, s);
    case 8: return launch_fused<T, 8>(t, rank, x, residual, w, eps, out, rows, hidden, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_all_reduce(AllReduceAlgo algo, bool bf16, int world, const PeerTable& table, int rank,
                              const void* in, void* out, size_t packs, cudaStream_t stream) {
  if (algo == AllReduceAlgo::Nccl || packs > table.half_packs) return cudaErrorInvalidValue;
  const auto* i = static_cast<const uint4*>(in);
  auto* o = static_cast<uint4*>(out);
  return bf16 ? launch_world<__nv_bfloat16>(world, algo, table, rank, i, o, packs, stream)
              : launch_world<float>(world, algo, table, rank, i, o, packs, stream);
}

cudaError_t launch_all_reduce_add_rms_norm(bool bf16, int world, const PeerTable& table, int rank, const void* x,
                                           float* residual, const void* w, float eps, void* out, int rows, int hidden,
                                           cudaStream_t stream) {
  const size_t bytes = size_t(world) * size_t(rows) * size_t(hidden) * (bf16 ? 2 : 4);  // every rank's region
  if (rows <= 0 || hidden <= 0 || hidden % 8 != 0 || hidden > kFusedNormMaxHidden ||
      bytes > table.half_packs * kCustomAllReduceAlign)
    return cudaErrorInvalidValue;
  return bf16 ? launch_fused_world<uint16_t>(world, table, rank, x, residual, w, eps, out, rows, hidden, stream)
              : launch_fused_world<float>(world, table, rank, x, residual, w, eps, out, rows, hidden, stream);
}

}  // namespace gs::custom_ar
