// NcclCommunicator: ncclAllReduce / AllGather / Broadcast on the backend's stream. NCCL kernels
// are captured by stream capture like any kernel, so the FULL and PIECEWISE graphs hold them;
// every rank captures the same graphs in the same order (the runner's dispatch is identical).
#include "distributed/cuda/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <exception>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "core/error.h"
#include "core/logging.h"

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
  NcclCommunicator(const std::string& group, int rank, int world, Backend& backend)
      : rank_(rank), world_(world), stream_(cuda_stream(backend)) {
    GS_CHECK(group.size() == 2 * sizeof(ncclUniqueId), "NCCL group id must be {} hex digits, got {}",
             2 * sizeof(ncclUniqueId), group.size());
    ncclUniqueId id;
    for (size_t i = 0; i < sizeof(id); ++i) id.internal[i] = char(std::stoi(group.substr(2 * i, 2), nullptr, 16));
    GS_CUDA_CHECK(cudaSetDevice(backend.device().index));
    setenv("NCCL_NVLS_ENABLE", "0", 0);  // NVLink multicast can take shared GPUs down: only on request
    GS_NCCL_CHECK(ncclCommInitRank(&comm_, world, id, rank));
    GS_CUDA_CHECK(cudaMalloc(&flag_, sizeof(float)));
    barrier();  // connects the ranks now, before the KV cache takes the memory NCCL's buffers need
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, backend.device().index);
    spdlog::info("tensor parallel rank {} of {}: {} (PCI {:02x}:{:02x}), all-reduce: NCCL {} for every size", rank,
                 world, prop.name, prop.pciBusID, prop.pciDeviceID, NCCL_VERSION_CODE);
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
  std::string name() const override { return "nccl"; }

  void all_reduce(const Tensor& t) override {
    GS_NCCL_CHECK(ncclAllReduce(t.data(), t.data(), size_t(t.numel()), nccl_type(t.dtype()), ncclSum, comm_, stream_));
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
  cudaStream_t stream_;
  ncclComm_t comm_ = nullptr;
  void* flag_ = nullptr;
};

}  // namespace

std::string make_nccl_group_id() {
  ncclUniqueId id;
  GS_NCCL_CHECK(ncclGetUniqueId(&id));
  std::string hex;
  for (char c : id.internal) hex += fmt::format("{:02x}", uint8_t(c));
  return hex;
}

std::unique_ptr<Communicator> make_nccl_communicator(const std::string& group, int rank, int world, Backend& backend) {
  return std::make_unique<NcclCommunicator>(group, rank, world, backend);
}

}  // namespace gs
