// The custom all-reduce's kernels (distributed/cuda/custom_all_reduce_kernels.h): the cross-GPU
// barrier and the one-shot / two-shot sums over the ranks' mapped buffers.
#include <cuda_bf16.h>

#include <algorithm>
#include <type_traits>

#include "distributed/cuda/custom_all_reduce_kernels.h"

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

}  // namespace

cudaError_t launch_all_reduce(AllReduceAlgo algo, bool bf16, int world, const PeerTable& table, int rank,
                              const void* in, void* out, size_t packs, cudaStream_t stream) {
  if (algo == AllReduceAlgo::Nccl || packs > table.half_packs) return cudaErrorInvalidValue;
  const auto* i = static_cast<const uint4*>(in);
  auto* o = static_cast<uint4*>(out);
  return bf16 ? launch_world<__nv_bfloat16>(world, algo, table, rank, i, o, packs, stream)
              : launch_world<float>(world, algo, table, rank, i, o, packs, stream);
}

}  // namespace gs::custom_ar
