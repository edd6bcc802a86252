// The custom all-reduce's kernels (distributed/cuda/custom_all_reduce_kernels.h): the cross-GPU
// barrier, the one-shot / two-shot sums over the ranks' mapped buffers, the one-shot sum fused
// with the residual add + RMSNorm after it, and the column gather of vocab-parallel logits.
#include <cuda_bf16.h>

#include <algorithm>
#include <type_traits>

#include "distributed/cuda/custom_all_reduce_kernels.h"
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/peer_sum.cuh"

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

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Block 0's thread 0 keeps a call's timeline when t.trace is set (TraceRecord); the records are
// numbered in call order (the same on every rank).
struct Tracer {
  TraceRecord* rec = nullptr;
  uint32_t* next = nullptr;
  uint64_t t[5] = {};
  __device__ Tracer(const PeerTable& table, int rank) {
    if (table.trace && blockIdx.x == 0 && threadIdx.x == 0)
      rec = table.trace, next = &table.sig[rank]->trace_next, t[0] = global_ns();
  }
  __device__ __forceinline__ void mark(int i) {
    if (rec) t[i] = global_ns();
  }
  __device__ void write(uint32_t kind, int rows) {
    if (!rec) return;
    t[4] = global_ns();
    const uint32_t n = atomicAdd(next, 1u);
    TraceRecord& r = rec[n % kTraceCalls];
    r.call = n, r.kind = kind, r.rows = uint32_t(rows);
    for (int i = 0; i < 5; ++i) r.t[i] = t[i];
  }
};

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
  Tracer tr(t, rank);
  tr.mark(1);
  const uint32_t call = next_call(t, rank);
  const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = size_t(gridDim.x) * blockDim.x;
  uint4* mine = data_of(t, rank, call);
  for (size_t i = first; i < packs; i += stride) mine[i] = in[i];
  tr.mark(2);
  barrier<World>(t, rank, kStart, call);
  tr.mark(3);
  for (size_t i = first; i < packs; i += stride) out[i] = sum_at<T, World>(t, call, i);
  finish_call(t, rank, call);
  tr.write(0, int(packs));
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

// Writes this block's rows of x (rows b, b + gridDim.x, ...) into region `rank` (rows x hidden
// elements) of dst(p) for the ranks p that want(p), own rank first; with no_neg_zero, -0 becomes +0.
template <typename T, int World, typename Dst, typename Want>
__device__ __forceinline__ void push_rows(const Dst& dst, const Want& want, int rank, const T* x, int rows, int hidden,
                                          bool no_neg_zero) {
  using namespace gs::cuda;
  const int64_t region = int64_t(rows) * hidden;
  for (int row = blockIdx.x; row < rows; row += gridDim.x)
    for (int c = threadIdx.x; c < hidden / 8; c += blockDim.x) {
      const int64_t at = int64_t(row) * hidden + c * 8;
      float v[8];
      load8(x + at, v);
      if (no_neg_zero)
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = sendable(v[i]);
#pragma unroll
      for (int q = 0; q < World; ++q) {
        const int p = (rank + q) % World;
        if (want(p)) store8(dst(p) + rank * region + at, v);
      }
    }
}

// The fused one-shot all-reduce + residual add + RMSNorm with the barrier
// (launch_all_reduce_add_rms_norm). T is the element type of x, w and out as the CUDA backend's
// kernels name it (uint16_t: bf16, or float). Push, not pull: a block writes its rows of x into
// every rank's buffer (region `rank` of World regions of rows x hidden), meets the same block of
// every peer (the barrier's release orders those writes before its flag), then reads only its own
// buffer: one NVLink crossing per call for the data, one for the flag.
template <typename T, int World>
__global__ void __launch_bounds__(1024)
    one_shot_add_rms_norm_kernel(PeerTable t, int rank, const T* x, float* residual, const T* w, float eps, T* out,
                                 int rows, int hidden) {
  using namespace gs::cuda;
  Tracer tr(t, rank);
  pdl_wait();
  tr.mark(1);
  const uint32_t call = next_call(t, rank);
  const int64_t region = int64_t(rows) * hidden;  // elements of one rank's message
  push_rows<T, World>([&](int p) { return reinterpret_cast<T*>(data_of(t, p, call)); }, [](int) { return true; }, rank,
                      x, rows, hidden, false);
  tr.mark(2);
  barrier<World>(t, rank, kStart, call);
  tr.mark(3);
  const T* mine = reinterpret_cast<const T*>(data_of(t, rank, call));
  pdl_trigger();
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = int64_t(row) * hidden;
    add_norm_row<T>([&](int p, int e, float* f) { load8(mine + p * region + base + e, f); }, World, residual, w, eps,
                    out, base, hidden);
  }
  finish_call(t, rank, call);
  tr.write(1, rows);
}

template <typename T>
__device__ __forceinline__ T* lamport_of(const PeerTable& t, int p, uint32_t call) {
  return reinterpret_cast<T*>(static_cast<char*>(t.lamport[p]) + (call % 3) * t.lamport_bytes);
}

// The flagless fused kernel (launch_lamport_add_rms_norm).
template <typename T, int World>
__global__ void __launch_bounds__(1024)
    lamport_add_rms_norm_kernel(PeerTable t, int rank, const T* x, float* residual, const T* w, float eps, T* out,
                                int rows, int hidden) {
  using namespace gs::cuda;
  Tracer tr(t, rank);
  pdl_wait();
  tr.mark(1);
  Signal* sig = t.sig[rank];
  const uint32_t call = sig->lamport_counter[blockIdx.x] + 1;
  const int64_t region = int64_t(rows) * hidden;
  push_rows<T, World>([&](int p) { return lamport_of<T>(t, p, call); }, [&](int p) { return p != rank; }, rank, x, rows,
                      hidden, true);
  tr.mark(2);
  // Refill the previous call's buffer, this block's share of what that call wrote.
  const uint32_t prev = (call + 2) % 3;
  fill_packs(reinterpret_cast<uint4*>(static_cast<char*>(t.lamport[rank]) + prev * t.lamport_bytes),
             sig->lamport_used[prev] / 16, kSentinel<T>);
  pdl_trigger();
  const T* mine = lamport_of<T>(t, rank, call);
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = int64_t(row) * hidden;
    add_norm_row<T>(
        [&](int p, int e, float* f) {
          if (p != rank) return spin_load8(mine + p * region + base + e, f);
          load8(x + base + e, f);
#pragma unroll
          for (int i = 0; i < 8; ++i) f[i] = sendable(f[i]);  // as the peers received it
        },
        World, residual, w, eps, out, base, hidden);
    if (row == int(blockIdx.x)) tr.mark(3);
  }
  if (threadIdx.x == 0) {
    if (blockIdx.x == 0) sig->lamport_used[call % 3] = uint32_t(World * region * int64_t(sizeof(T)));
    sig->lamport_counter[blockIdx.x] = call;
  }
  tr.write(2, rows);
}

__global__ void fill_kernel(uint4* p, size_t packs, uint32_t pattern) { gs::cuda::fill_packs(p, packs, pattern); }

// Pack i (16 bytes) of rank r's [rows, row_packs] block into out [rows, width_bytes], at columns
// [r row_packs 16, ...) of its row, cut at width_bytes: whole where it fits and is aligned, else
// in 2-byte units (the elements are 2 or 4 bytes).
__device__ __forceinline__ void store_columns(char* out, int64_t width_bytes, int row_packs, int r, size_t i,
                                              const uint4& v) {
  const int64_t row = int64_t(i / size_t(row_packs));
  const int64_t col = (int64_t(r) * row_packs + int64_t(i % size_t(row_packs))) * 16;
  if (col >= width_bytes) return;
  char* dst = out + row * width_bytes + col;
  if (col + 16 <= width_bytes && reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
    *reinterpret_cast<uint4*>(dst) = v;
    return;
  }
  const auto* src = reinterpret_cast<const uint16_t*>(&v);
  for (int b = 0; b < 16 && col + b < width_bytes; b += 2) *reinterpret_cast<uint16_t*>(dst + b) = src[b / 2];
}

// The column gather (launch_gather_columns). Push, as the fused kernel: a thread writes its packs
// of `local` into region `rank` of every peer's buffer and into this rank's columns of out, meets
// the same block of every peer, then copies the peers' regions of those packs from its own buffer.
// Every rank gives a thread the same packs, so its block's barrier orders the writes it reads.
template <int World>
__global__ void __launch_bounds__(kMaxThreads)
    gather_columns_kernel(PeerTable t, int rank, const uint4* local, char* out, int rows, int row_packs,
                          int64_t width_bytes) {
  gs::cuda::pdl_wait();
  const uint32_t call = next_call(t, rank);
  const size_t packs = size_t(rows) * size_t(row_packs);
  const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = first; i < packs; i += stride) {
    const uint4 v = local[i];
#pragma unroll
    for (int q = 1; q < World; ++q) data_of(t, (rank + q) % World, call)[size_t(rank) * packs + i] = v;
    store_columns(out, width_bytes, row_packs, rank, i, v);
  }
  barrier<World>(t, rank, kStart, call);
  const uint4* mine = data_of(t, rank, call);
  for (size_t i = first; i < packs; i += stride)
#pragma unroll
    for (int q = 1; q < World; ++q) {
      const int r = (rank + q) % World;
      store_columns(out, width_bytes, row_packs, r, i, mine[size_t(r) * packs + i]);
    }
  finish_call(t, rank, call);
}

template <typename T, int World>
cudaError_t launch_fused(bool lamport, const PeerTable& t, int rank, const void* x, float* residual, const void* w,
                         float eps, void* out, int rows, int hidden, cudaStream_t s) {
  const int chunks = hidden / 8;
  const int threads = std::min(1024, (chunks + 31) / 32 * 32);  // the backend's add_rms_norm layout
  return gs::cuda::launch_pdl(lamport ? lamport_add_rms_norm_kernel<T, World> : one_shot_add_rms_norm_kernel<T, World>,
                              dim3(kMaxBlocks), dim3(threads), 0, s, t, rank, static_cast<const T*>(x), residual,
                              static_cast<const T*>(w), eps, static_cast<T*>(out), rows, hidden);
}

template <typename T>
cudaError_t launch_fused_world(bool lamport, int world, const PeerTable& t, int rank, const void* x, float* residual,
                               const void* w, float eps, void* out, int rows, int hidden, cudaStream_t s) {
  switch (world) {
    case 2: return launch_fused<T, 2>(lamport, t, rank, x, residual, w, eps, out, rows, hidden, s);
    case 4: return launch_fused<T, 4>(lamport, t, rank, x, residual, w, eps, out, rows, hidden, s);
    case 8: return launch_fused<T, 8>(lamport, t, rank, x, residual, w, eps, out, rows, hidden, s);
    default: return cudaErrorInvalidValue;
  }
}

// Both fused launches: the limits, then the kernel for the dtype and world.
cudaError_t launch_fused_checked(bool lamport, bool bf16, int world, const PeerTable& table, int rank, const void* x,
                                 float* residual, const void* w, float eps, void* out, int rows, int hidden,
                                 cudaStream_t stream) {
  const size_t bytes = size_t(world) * size_t(rows) * size_t(hidden) * (bf16 ? 2 : 4);  // every rank's region
  const size_t room = lamport ? table.lamport_bytes : table.half_packs * kCustomAllReduceAlign;
  if (rows <= 0 || hidden <= 0 || hidden % 8 != 0 || hidden > kFusedNormMaxHidden || bytes > room)
    return cudaErrorInvalidValue;
  return bf16
             ? launch_fused_world<uint16_t>(lamport, world, table, rank, x, residual, w, eps, out, rows, hidden, stream)
             : launch_fused_world<float>(lamport, world, table, rank, x, residual, w, eps, out, rows, hidden, stream);
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
  return launch_fused_checked(false, bf16, world, table, rank, x, residual, w, eps, out, rows, hidden, stream);
}

cudaError_t launch_lamport_add_rms_norm(bool bf16, int world, const PeerTable& table, int rank, const void* x,
                                        float* residual, const void* w, float eps, void* out, int rows, int hidden,
                                        cudaStream_t stream) {
  return launch_fused_checked(true, bf16, world, table, rank, x, residual, w, eps, out, rows, hidden, stream);
}

cudaError_t launch_gather_columns(int world, const PeerTable& table, int rank, const void* local, void* out, int rows,
                                  size_t row_bytes, size_t width_bytes, cudaStream_t stream) {
  const size_t packs = size_t(rows) * (row_bytes / 16);
  if (rows <= 0 || row_bytes == 0 || row_bytes % 16 != 0 || width_bytes % 2 != 0 ||
      width_bytes > size_t(world) * row_bytes || size_t(world) * packs > table.half_packs)
    return cudaErrorInvalidValue;
  const size_t per_block = (packs + kMaxBlocks - 1) / kMaxBlocks;
  const int threads = int(std::clamp<size_t>((per_block + 31) / 32 * 32, 32, kMaxThreads));
  const auto run = [&](auto* kernel) {
    return gs::cuda::launch_pdl(kernel, dim3(kMaxBlocks), dim3(threads), 0, stream, table, rank,
                                static_cast<const uint4*>(local), static_cast<char*>(out), rows, int(row_bytes / 16),
                                int64_t(width_bytes));
  };
  switch (world) {
    case 2: return run(gather_columns_kernel<2>);
    case 4: return run(gather_columns_kernel<4>);
    case 8: return run(gather_columns_kernel<8>);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t lamport_fill(void* p, size_t bytes, bool bf16, cudaStream_t stream) {
  if (bytes % 16 != 0) return cudaErrorInvalidValue;
  const size_t packs = bytes / 16;
  const int blocks = int(std::clamp<size_t>((packs + 255) / 256, 1, 1024));
  fill_kernel<<<blocks, 256, 0, stream>>>(static_cast<uint4*>(p), packs,
                                          bf16 ? gs::cuda::kSentinel<uint16_t> : gs::cuda::kSentinel<float>);
  return cudaGetLastError();
}

}  // namespace gs::custom_ar
