// What an instantiated CUDA graph costs in device memory (docs/CUDA_GRAPHS.md §8): graphs of N
// kernel nodes, 200 instantiations each, memory from cudaMemGetInfo after instantiation and after
// one launch of each; then instantiation flags and keeping / dropping the captured cudaGraph_t.
//   nvcc -O2 -arch=sm_90a -o roofline_graph_mem tools/gpu/roofline_graph_mem.cu && ./roofline_graph_mem 8 kept
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CK(x)                                                                      \
  do {                                                                             \
    cudaError_t e_ = (x);                                                          \
    if (e_ != cudaSuccess) {                                                       \
      std::printf("%s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__);    \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

__global__ void touch(float* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1.0f;
}

static size_t used() {
  size_t f = 0, t = 0;
  CK(cudaDeviceSynchronize());
  CK(cudaMemGetInfo(&f, &t));
  return t - f;
}

static cudaGraph_t capture(cudaStream_t s, float* buf, int nodes) {
  cudaGraph_t g = nullptr;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < nodes; ++i) touch<<<4, 128, 0, s>>>(buf, 512);
  CK(cudaStreamEndCapture(s, &g));
  return g;
}

// KiB per graph after instantiating `count` graphs of `nodes` nodes (and after launching them).
static void measure(cudaStream_t s, float* buf, int nodes, unsigned long long flags, bool drop_graph, const char* what) {
  const int count = 200;
  std::vector<cudaGraph_t> gs;
  std::vector<cudaGraphExec_t> ex;
  const size_t m0 = used();
  for (int i = 0; i < count; ++i) {
    cudaGraph_t g = capture(s, buf, nodes);
    cudaGraphExec_t e = nullptr;
    if (flags & cudaGraphInstantiateFlagUpload) {
      cudaGraphInstantiateParams p{};
      p.flags = flags;
      p.uploadStream = s;
      CK(cudaGraphInstantiateWithParams(&e, g, &p));
    } else {
      CK(cudaGraphInstantiateWithFlags(&e, g, flags));
    }
    if (drop_graph) {
      CK(cudaGraphDestroy(g));
    } else {
      gs.push_back(g);
    }
    ex.push_back(e);
  }
  const size_t m1 = used();
  for (auto e : ex) CK(cudaGraphLaunch(e, s));
  const size_t m2 = used();
  std::printf("%-34s nodes %4d: %7.1f KiB/graph after instantiate, %7.1f after a launch\n", what, nodes,
              double(m1 - m0) / count / 1024.0, double(m2 - m0) / count / 1024.0);
  for (auto e : ex) CK(cudaGraphExecDestroy(e));
  for (auto g : gs) CK(cudaGraphDestroy(g));
}

// One measurement per process (the driver keeps what destroyed graphs held for later graphs, so a
// second series in one process reads ~0): roofline_graph_mem NODES [kept|destroyed|upload|priority|device]
int main(int argc, char** argv) {
  const int nodes = argc > 1 ? std::atoi(argv[1]) : 8;
  const std::string v = argc > 2 ? argv[2] : "kept";
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float* buf = nullptr;
  CK(cudaMalloc(&buf, 1 << 20));
  touch<<<1, 1, 0, s>>>(buf, 1);  // load the module outside the measurement
  if (v == "kept") measure(s, buf, nodes, 0, false, "flags 0, graph kept");
  if (v == "destroyed") measure(s, buf, nodes, 0, true, "flags 0, graph destroyed");
  if (v == "upload") measure(s, buf, nodes, cudaGraphInstantiateFlagUpload, false, "Upload (WithParams)");
  if (v == "priority") measure(s, buf, nodes, cudaGraphInstantiateFlagUseNodePriority, false, "UseNodePriority");
  if (v == "device") measure(s, buf, nodes, cudaGraphInstantiateFlagDeviceLaunch, false, "DeviceLaunch");
  CK(cudaFree(buf));
  return 0;
}
