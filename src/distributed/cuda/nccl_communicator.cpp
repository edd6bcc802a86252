// NcclCommunicator: ncclAllReduce / AllGather / Broadcast on the backend's stream, with the custom
// all-reduce over NVLink peer memory for the sizes its policy picks. NCCL kernels and the custom
// kernels are captured by stream capture like any kernel, so the FULL and PIECEWISE graphs hold
// them; every rank captures the same graphs in the same order (the runner's dispatch is identical).
#include "distributed/cuda/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <cstdlib>
#include <exception>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "core/error.h"
#include "core/logging.h"
#include "distributed/cuda/custom_all_reduce.h"

namespace gs {

namespace {

#define GS_NCCL_CHECK(expr)                                                   \
  do {                                                                        \
    const ncclResult_t r_ = (expr);                                           \
    if (r_ != ncclSuccess)                                                    \
      ::gs::fail("NCCL error in {}: {} ({})", #expr, ncclGetErrorString(r_),  \
                 ncclGetLastError(nullptr) ? ncclGetLastError(nullptr) : ""); \
  } while (0)

ncclDataType_t nccl_type(DType dt) {
  switch (dt) {
    case DType::F32: return ncclFloat32;
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    case DType::I32: return ncclInt32;
    default: fail("NCCL: unsupported dtype {}", dtype_name(dt));
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const std::string& group, int rank, int world, Backend& backend, bool disable_custom,
                   const AllReduceKernelOptions& options)
      : rank_(rank),
        world_(world),
        stream_(cuda_stream(backend)),
        fuse_norm_(options.fuse_add_rms_norm),
        in_projection_(options.fuse_add_rms_norm && options.in_projection) {
    GS_CHECK(group.size() == 2 * sizeof(ncclUniqueId), "NCCL group id must be {} hex digits, got {}",
             2 * sizeof(ncclUniqueId), group.size());
    ncclUniqueId id;
    for (size_t i = 0; i < sizeof(id); ++i) id.internal[i] = char(std::stoi(group.substr(2 * i, 2), nullptr, 16));
    GS_CUDA_CHECK(cudaSetDevice(backend.device().index));
    setenv("NCCL_NVLS_ENABLE", "0", 0);  // NVLink multicast can take shared GPUs down: only on request
    GS_NCCL_CHECK(ncclCommInitRank(&comm_, world, id, rank));
    GS_CUDA_CHECK(cudaMalloc(&flag_, sizeof(float)));
    barrier();  // connects the ranks now, before the KV cache takes the memory NCCL's buffers need
    std::string why_not;
    custom_ = CustomAllReduce::create(
        rank, world, backend.device().index, backend.compute_dtype(), disable_custom, options.lamport,
        [this](const void* mine, size_t bytes) { return all_gather_host(mine, bytes); }, &why_not);
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, backend.device().index);
    spdlog::info("tensor parallel rank {} of {}: {} (PCI {:02x}:{:02x}), NCCL {}, all-reduce: {}", rank, world,
                 prop.name, prop.pciBusID, prop.pciDeviceID, NCCL_VERSION_CODE,
                 describe_all_reduce_policy(policy(), why_not));
  }
  ~NcclCommunicator() override {
    cudaFree(flag_);
    // A rank that fails must not block in a collective its peers will never join.
    if (std::uncaught_exceptions() > 0)
      ncclCommAbort(comm_);
    else
      ncclCommDestroy(comm_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string name() const override { return custom_ ? "custom+nccl" : "nccl"; }

  const AllReducePolicy& policy() const { return custom_ ? custom_->policy() : no_custom_; }
  void all_reduce(const Tensor& t) override {
    const bool aligned = reinterpret_cast<uintptr_t>(t.data()) % kCustomAllReduceAlign == 0;  // 16-byte packs
    all_reduce_with(t, aligned ? choose_all_reduce(policy(), t.nbytes()) : AllReduceAlgo::Nccl);
  }
  void all_reduce_with(const Tensor& t, AllReduceAlgo algo) {
    if (algo != AllReduceAlgo::Nccl) {
      GS_CHECK(custom_, "the {} all-reduce was asked for, but this group has no custom all-reduce",
               all_reduce_algo_name(algo));
      custom_->all_reduce(t, algo, stream_);
      return;
    }
    GS_NCCL_CHECK(ncclAllReduce(t.data(), t.data(), size_t(t.numel()), nccl_type(t.dtype()), ncclSum, comm_, stream_));
  }
  // One fused kernel where the custom one-shot all-reduce serves x (decode sizes), else the
  // all-reduce and the backend's add_rms_norm (always with AllReduceKernelOptions::fuse_add_rms_norm off).
  void all_reduce_add_rms_norm(Backend& backend, const Tensor& residual, const Tensor& x, const Tensor& w, float eps,
                               const Tensor& out) override {
    if (custom_ && fuse_norm_ && custom_->fits_add_rms_norm(residual, x, w, out))
      custom_->all_reduce_add_rms_norm(residual, x, w, eps, out, stream_);
    else
      Communicator::all_reduce_add_rms_norm(backend, residual, x, w, eps, out);
  }
  std::optional<PeerSum> peer_sum(int64_t rows, int64_t hidden, DType dt) const override {
    if (!custom_ || !in_projection_ || size_t(rows * hidden) * dtype_size(dt) > policy().one_shot_max_bytes)
      return std::nullopt;
    return custom_->peer_sum(rows, hidden, dt);
  }
  void all_gather(const Tensor& in, const Tensor& out) override {
    GS_CHECK(in.dtype() == out.dtype() && out.numel() == in.numel() * world_, "all_gather: out {} must hold {} x in {}",
             out.str(), world_, in.str());
    GS_NCCL_CHECK(ncclAllGather(in.data(), out.data(), size_t(in.numel()), nccl_type(in.dtype()), comm_, stream_));
  }
  void broadcast(const Tensor& t, int root) override {
    GS_NCCL_CHECK(ncclBroadcast(t.data(), t.data(), size_t(t.numel()), nccl_type(t.dtype()), root, comm_, stream_));
  }
  void gather_columns(const Tensor& local, const Tensor& scratch, const Tensor& out) override {
    check_gather_columns(local, scratch, out, world_);
    if (custom_ && custom_->gather_columns(local, out, stream_)) return;
    all_gather(local, scratch.prefix({world_ * local.numel()}));
    const size_t es = dtype_size(out.dtype()), n = size_t(local.dim(0)), c = size_t(local.dim(1)),
                 w = size_t(out.dim(1));
    const auto* s = static_cast<const uint8_t*>(scratch.data());
    auto* o = static_cast<uint8_t*>(out.data());
    for (int r = 0; r < world_ && size_t(r) * c < w; ++r) {  // rank r's [n, c] block -> columns [r c, ...)
      const size_t cols = std::min(c, w - size_t(r) * c);
      GS_CUDA_CHECK(cudaMemcpy2DAsync(o + size_t(r) * c * es, w * es, s + size_t(r) * n * c * es, c * es, cols * es, n,
                                      cudaMemcpyDeviceToDevice, stream_));
    }
  }
  void barrier() override {
    GS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    GS_NCCL_CHECK(ncclAllReduce(flag_, flag_, 1, ncclFloat32, ncclSum, comm_, stream_));
    GS_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

 private:
  static cudaStream_t cuda_stream(Backend& backend) {
    auto* s = dynamic_cast<CudaStream*>(&backend.stream());
    GS_CHECK(s, "the NCCL communicator runs on the CUDA backend, not on {}", backend.name());
    return s->handle();
  }

  int rank_, world_;
  // Every rank's `bytes` host bytes in rank order, through a device buffer (start-up only).
  std::vector<char> all_gather_host(const void* mine, size_t bytes) {
    std::vector<char> all(bytes * size_t(world_));
    char* dev = nullptr;
    GS_CUDA_CHECK(cudaMalloc(&dev, all.size()));
    try {
      GS_CUDA_CHECK(cudaMemcpy(dev + size_t(rank_) * bytes, mine, bytes, cudaMemcpyHostToDevice));
      GS_NCCL_CHECK(ncclAllGather(dev + size_t(rank_) * bytes, dev, bytes, ncclChar, comm_, stream_));
      GS_CUDA_CHECK(cudaStreamSynchronize(stream_));
      GS_CUDA_CHECK(cudaMemcpy(all.data(), dev, all.size(), cudaMemcpyDeviceToHost));
    } catch (...) {
      cudaFree(dev);
      throw;
    }
    cudaFree(dev);
    return all;
  }

  cudaStream_t stream_;
  ncclComm_t comm_ = nullptr;
  void* flag_ = nullptr;
  std::unique_ptr<CustomAllReduce> custom_;
  AllReducePolicy no_custom_;
  bool fuse_norm_ = true;
  bool in_projection_ = true;  // AllReduceKernelOptions::in_projection (and fuse_add_rms_norm)
};

}  // namespace

std::string make_nccl_group_id() {
  ncclUniqueId id;
  GS_NCCL_CHECK(ncclGetUniqueId(&id));
  std::string hex;
  for (char c : id.internal) hex += fmt::format("{:02x}", uint8_t(c));
  return hex;
}

std::unique_ptr<Communicator> make_nccl_communicator(const std::string& group, int rank, int world, Backend& backend,
                                                     bool disable_custom_all_reduce,
                                                     const AllReduceKernelOptions& options) {
  return std::make_unique<NcclCommunicator>(group, rank, world, backend, disable_custom_all_reduce, options);
}

void all_reduce_with(Communicator& comm, const Tensor& t, AllReduceAlgo algo) {
  auto* nccl = dynamic_cast<NcclCommunicator*>(&comm);
  GS_CHECK(nccl, "all_reduce_with needs the NCCL communicator, not {}", comm.name());
  nccl->all_reduce_with(t, algo);
}

AllReducePolicy all_reduce_policy(const Communicator& comm) {
  const auto* nccl = dynamic_cast<const NcclCommunicator*>(&comm);
  GS_CHECK(nccl, "all_reduce_policy needs the NCCL communicator, not {}", comm.name());
  return nccl->policy();
}

}  // namespace gs
