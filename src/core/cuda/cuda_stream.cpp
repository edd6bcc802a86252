// Implements core/cuda/cuda_stream.h (CudaStream).
#include "core/cuda/cuda_stream.h"

#include "core/cuda/cuda_check.h"
#include "core/logging.h"

namespace gs {

namespace {

// An instantiated graph; replays on the stream it was captured on.
class CudaGraph final : public Graph {
 public:
  CudaGraph(cudaGraph_t graph, cudaStream_t stream) : graph_(graph), stream_(stream) {
    GS_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &num_nodes_));
    const cudaError_t e = cudaGraphInstantiate(&exec_, graph_, 0);
    if (e != cudaSuccess) {
      cudaGetLastError();
      cudaGraphDestroy(graph_);
      fail("cudaGraphInstantiate failed: {}", cudaGetErrorString(e));
    }
  }
  ~CudaGraph() override {
    cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  void replay() override { GS_CUDA_CHECK(cudaGraphLaunch(exec_, stream_)); }
  size_t num_nodes() const override { return num_nodes_; }

 private:
  cudaGraph_t graph_;
  cudaGraphExec_t exec_ = nullptr;
  cudaStream_t stream_;
  size_t num_nodes_ = 0;
};

}  // namespace

CudaStream::CudaStream(int device, Allocator* guarded) : device_(device), guarded_(guarded) {
  GS_CUDA_CHECK(cudaSetDevice(device_));
  GS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

CudaStream::~CudaStream() {
  if (capturing_) {  // abandoned capture (an exception during capture): end it, drop the graph
    cudaGraph_t g = nullptr;
    if (cudaStreamEndCapture(stream_, &g) == cudaSuccess && g) cudaGraphDestroy(g);
    cudaGetLastError();
    if (guarded_) guarded_->lower_capture_guard();
  }
  if (cudaStreamDestroy(stream_) != cudaSuccess) {
    cudaGetLastError();
    spdlog::error("cudaStreamDestroy failed on cuda:{}", device_);
  }
}

void CudaStream::begin_capture() {
  GS_CHECK(!capturing_, "begin_capture: the stream is already capturing");
  GS_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  capturing_ = true;
  if (guarded_) guarded_->raise_capture_guard();
}

std::unique_ptr<Graph> CudaStream::end_capture() {
  GS_CHECK(capturing_, "end_capture: the stream is not capturing");
  capturing_ = false;
  if (guarded_) guarded_->lower_capture_guard();
  cudaGraph_t g = nullptr;
  const cudaError_t e = cudaStreamEndCapture(stream_, &g);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (g) cudaGraphDestroy(g);
    fail(
        "CUDA graph capture failed: {} (an operation in the captured region is not capturable, "
        "e.g. a synchronous copy, an allocation or a sync)",
        cudaGetErrorString(e));
  }
  return std::make_unique<CudaGraph>(g, stream_);
}

void CudaStream::synchronize() {
  GS_CHECK(!capturing_, "synchronize() while the stream is capturing a graph");
  GS_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

CudaEventTimer::CudaEventTimer(cudaStream_t stream) : stream_(stream) {
  GS_CUDA_CHECK(cudaEventCreate(&start_));
  GS_CUDA_CHECK(cudaEventCreate(&stop_));
}

CudaEventTimer::~CudaEventTimer() {
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
}

void CudaEventTimer::start() { GS_CUDA_CHECK(cudaEventRecord(start_, stream_)); }
void CudaEventTimer::stop() { GS_CUDA_CHECK(cudaEventRecord(stop_, stream_)); }

float CudaEventTimer::elapsed_ms() {
  GS_CUDA_CHECK(cudaEventSynchronize(stop_));
  float ms = 0;
  GS_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
  return ms;
}

}  // namespace gs
