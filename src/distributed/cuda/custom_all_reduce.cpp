// Implements distributed/cuda/custom_all_reduce.h: the buffers, their IPC exchange at start-up
// and the call (the kernels are in custom_all_reduce_kernels.cu).
#include "distributed/cuda/custom_all_reduce.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "core/cuda/cuda_check.h"
#include "core/error.h"
#include "core/logging.h"
#include "distributed/cuda/custom_all_reduce_kernels.h"

namespace gs {

using custom_ar::kSignalBytes;

namespace {

// What each rank tells the others at start-up.
struct RankRecord {
  cudaIpcMemHandle_t handle;
  char host[64];
  char pci_bus_id[32];
};

std::string host_name() {
  char h[64] = {};
  gethostname(h, sizeof(h) - 1);
  return h;
}

// True when this process may map `peer`'s buffer: CUDA peer access where the peer's GPU is
// visible here (else the IPC open below decides, as with one GPU visible per worker process).
bool peer_access_allowed(int device, const RankRecord& peer) {
  int peer_device = -1;
  if (cudaDeviceGetByPCIBusId(&peer_device, peer.pci_bus_id) != cudaSuccess) {
    cudaGetLastError();
    return true;
  }
  if (peer_device == device) return false;  // two ranks on one GPU: no IPC to itself
  int ok = 0;
  return cudaDeviceCanAccessPeer(&ok, device, peer_device) == cudaSuccess && ok;
}

}  // namespace

CustomAllReduce::CustomAllReduce(int rank, int world, AllReducePolicy policy)
    : rank_(rank), world_(world), policy_(policy), peers_(size_t(world), nullptr) {}

CustomAllReduce::~CustomAllReduce() {
  if (trace_) {
    write_trace();
    cudaFree(trace_);
  }
  for (void* p : opened_) cudaIpcCloseMemHandle(p);
  if (own_) cudaFree(own_);
}

std::unique_ptr<CustomAllReduce> CustomAllReduce::create(int rank, int world, int device, DType activations,
                                                         bool disabled, bool lamport, const HostAllGather& all_gather,
                                                         std::string* why_not) {
  AllReduceGroupFacts facts;
  facts.world = world, facts.disabled = disabled;
  facts.supported_dtype = activations == DType::BF16 || activations == DType::F32;
  AllReducePolicy policy = choose_all_reduce_policy(facts, why_not);
  if (!policy.custom_available) return nullptr;  // every rank decides alike from the same config

  std::unique_ptr<CustomAllReduce> ar(new CustomAllReduce(rank, world, policy));
  ar->lamport_dtype_ = activations;
  ar->lamport_ = lamport;
  const size_t flagless = 3 * ar->lamport_bytes() + 3 * ar->peer_sum_bytes();  // sentinel-filled, at the end
  const size_t bytes = kSignalBytes + 2 * policy.custom_max_bytes + flagless;
  GS_CUDA_CHECK(cudaSetDevice(device));
  GS_CUDA_CHECK(cudaMalloc(&ar->own_, bytes));
  GS_CUDA_CHECK(cudaMemset(ar->own_, 0, bytes));
  GS_CUDA_CHECK(custom_ar::lamport_fill(static_cast<char*>(ar->own_) + bytes - flagless, flagless,
                                        activations == DType::BF16, nullptr));
  GS_CUDA_CHECK(cudaDeviceSynchronize());

  RankRecord mine{};
  GS_CUDA_CHECK(cudaIpcGetMemHandle(&mine.handle, ar->own_));
  std::strncpy(mine.host, host_name().c_str(), sizeof(mine.host) - 1);
  GS_CUDA_CHECK(cudaDeviceGetPCIBusId(mine.pci_bus_id, sizeof(mine.pci_bus_id), device));
  const std::vector<char> all = all_gather(&mine, sizeof(mine));
  GS_CHECK(all.size() == sizeof(mine) * size_t(world), "custom all-reduce: the start-up exchange returned {} bytes",
           all.size());
  std::vector<RankRecord> recs(static_cast<size_t>(world));
  std::memcpy(recs.data(), all.data(), all.size());

  facts.same_host = std::all_of(recs.begin(), recs.end(),
                                [&](const RankRecord& r) { return std::strncmp(r.host, mine.host, 64) == 0; });
  bool reachable = true;
  for (int r = 0; r < world && facts.same_host; ++r) {
    if (r == rank) {
      ar->peers_[size_t(r)] = ar->own_;
      continue;
    }
    void* p = nullptr;
    if (!peer_access_allowed(device, recs[size_t(r)]) ||
        cudaIpcOpenMemHandle(&p, recs[size_t(r)].handle, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
      cudaGetLastError();
      reachable = false;
      break;
    }
    ar->opened_.push_back(p);
    ar->peers_[size_t(r)] = p;
  }
  const int ok = reachable ? 1 : 0;
  const std::vector<char> oks = all_gather(&ok, sizeof(ok));
  for (int r = 0; r < world; ++r) facts.peers_reachable = facts.peers_reachable && oks[size_t(r) * sizeof(int)] != 0;
  ar->policy_ = choose_all_reduce_policy(facts, why_not);
  if (!ar->policy_.custom_available) return nullptr;
  ar->start_diagnosis();
  return ar;
}

void CustomAllReduce::start_diagnosis() {
  const char* path = std::getenv("GS_AR_TRACE");
  if (!path || !*path) return;
  const size_t bytes = sizeof(custom_ar::TraceRecord) * custom_ar::kTraceCalls;
  GS_CUDA_CHECK(cudaMalloc(&trace_, bytes));
  GS_CUDA_CHECK(cudaMemset(trace_, 0, bytes));
  trace_path_ = fmt::format("{}.rank{}", path, rank_);
  spdlog::warn("custom all-reduce rank {}: tracing every call into {}", rank_, trace_path_);
}

void CustomAllReduce::write_trace() const {
  std::vector<custom_ar::TraceRecord> recs(custom_ar::kTraceCalls);
  if (cudaDeviceSynchronize() != cudaSuccess ||
      cudaMemcpy(recs.data(), trace_, recs.size() * sizeof(recs[0]), cudaMemcpyDeviceToHost) != cudaSuccess) {
    spdlog::error("custom all-reduce rank {}: could not read the trace back", rank_);
    return;
  }
  std::ofstream f(trace_path_);
  for (const auto& r : recs)
    if (r.t[0] != 0)
      f << fmt::format("{} {} {} {} {} {} {} {}\n", r.call, r.kind, r.rows, r.t[0], r.t[1], r.t[2], r.t[3], r.t[4]);
  if (!f) spdlog::error("custom all-reduce rank {}: could not write {}", rank_, trace_path_);
}

void CustomAllReduce::all_reduce(const Tensor& t, AllReduceAlgo algo, cudaStream_t stream) {
  const size_t bytes = t.nbytes();
  GS_CHECK(algo != AllReduceAlgo::Nccl && bytes % kCustomAllReduceAlign == 0 && bytes <= policy_.custom_max_bytes &&
               reinterpret_cast<uintptr_t>(t.data()) % kCustomAllReduceAlign == 0 &&
               (t.dtype() == DType::BF16 || t.dtype() == DType::F32),
           "custom all-reduce: {} ({} bytes) with {} does not fit (bf16/f32, {}-byte aligned and a multiple of {} "
           "bytes, at most {})",
           t.str(), bytes, all_reduce_algo_name(algo), kCustomAllReduceAlign, kCustomAllReduceAlign,
           policy_.custom_max_bytes);
  if (bytes == 0) return;
  GS_CUDA_CHECK(custom_ar::launch_all_reduce(algo, t.dtype() == DType::BF16, world_, peer_table(), rank_, t.data(),
                                             t.data(), bytes / kCustomAllReduceAlign, stream));
}

bool CustomAllReduce::fits_add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& w,
                                        const Tensor& out) const {
  auto aligned = [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data()) % kCustomAllReduceAlign == 0; };
  const DType dt = x.dtype();
  if ((dt != DType::BF16 && dt != DType::F32) || residual.dtype() != DType::F32 || w.dtype() != dt ||
      out.dtype() != dt || x.ndim() != 2)
    return false;
  const int64_t rows = x.dim(0), hidden = x.dim(1);
  if (residual.shape() != x.shape() || out.shape() != x.shape() || w.numel() != hidden) return false;
  return aligned(residual) && aligned(x) && aligned(w) && aligned(out) &&
         fuse_all_reduce_add_rms_norm(policy_, rows, hidden, dtype_size(dt));
}

void CustomAllReduce::all_reduce_add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& w, float eps,
                                              const Tensor& out, cudaStream_t stream) {
  GS_CHECK(
      fits_add_rms_norm(residual, x, w, out),
      "custom all-reduce + add_rms_norm: x {}, residual {}, w {}, out {} do not fit (x, w, out bf16 or f32 "
      "[rows, hidden] / [hidden], residual f32, 16-byte aligned, a one-shot size, hidden a multiple of 8 up to {})",
      x.str(), residual.str(), w.str(), out.str(), kFusedNormMaxHidden);
  const bool lamport = lamport_ && x.dtype() == lamport_dtype_;
  GS_CUDA_CHECK((lamport ? custom_ar::launch_lamport_add_rms_norm : custom_ar::launch_all_reduce_add_rms_norm)(
      x.dtype() == DType::BF16, world_, peer_table(), rank_, x.data(), static_cast<float*>(residual.data()), w.data(),
      eps, out.data(), int(x.dim(0)), int(x.dim(1)), stream));
}

bool CustomAllReduce::gather_columns(const Tensor& local, const Tensor& out, cudaStream_t stream) {
  const size_t es = dtype_size(local.dtype());
  if ((es != 2 && es != 4) || reinterpret_cast<uintptr_t>(local.data()) % 16 != 0) return false;
  const int64_t n = local.dim(0), c = local.dim(1), w = out.dim(1);
  const size_t row_bytes = size_t(c) * es;
  const int64_t per_call = custom_gather_rows(policy_, world_, n, row_bytes);
  if (per_call == 0) return false;
  const auto* src = static_cast<const char*>(local.data());
  auto* dst = static_cast<char*>(out.data());
  for (int64_t r0 = 0; r0 < n; r0 += per_call)
    GS_CUDA_CHECK(custom_ar::launch_gather_columns(world_, peer_table(), rank_, src + r0 * row_bytes,
                                                   dst + r0 * w * int64_t(es), int(std::min(per_call, n - r0)),
                                                   row_bytes, size_t(w) * es, stream));
  return true;
}

custom_ar::PeerTable CustomAllReduce::peer_table() const {
  custom_ar::PeerTable table{};
  for (int r = 0; r < world_; ++r) {
    table.sig[r] = static_cast<custom_ar::Signal*>(peers_[size_t(r)]);
    table.data[r] = static_cast<char*>(peers_[size_t(r)]) + kSignalBytes;
  }
  table.half_packs = policy_.custom_max_bytes / kCustomAllReduceAlign;
  for (int r = 0; r < world_; ++r) table.lamport[r] = static_cast<char*>(table.data[r]) + 2 * policy_.custom_max_bytes;
  table.lamport_bytes = lamport_bytes();
  table.trace = trace_;
  return table;
}

size_t CustomAllReduce::lamport_bytes() const { return size_t(world_) * kFusedNormMaxBytes; }

size_t CustomAllReduce::peer_sum_bytes() const {
  return size_t(world_) * size_t(kFusedNormMaxHidden) * dtype_size(lamport_dtype_);
}

std::optional<PeerSum> CustomAllReduce::peer_sum(int64_t rows, int64_t hidden, DType dt) const {
  if (!lamport_ || rows != 1 || dt != lamport_dtype_ || hidden <= 0 || hidden % 8 != 0 ||
      hidden > kFusedNormMaxHidden || world_ > kPeerSumMaxRanks)
    return std::nullopt;
  PeerSum ps;
  ps.world = world_, ps.rank = rank_;
  const size_t at = kSignalBytes + 2 * policy_.custom_max_bytes + 3 * lamport_bytes();
  for (int r = 0; r < world_; ++r) ps.buffers[r] = static_cast<char*>(peers_[size_t(r)]) + at;
  ps.buffer_bytes = peer_sum_bytes();
  ps.state = &static_cast<custom_ar::Signal*>(own_)->peer_sum;
  return ps;
}

}  // namespace gs
