// KernelProfiler: the GPU's own record of every kernel that ran between start() and stop(),
// including the kernels of replayed CUDA graphs, for per-kernel breakdowns of a step
// (`graphserve bench kernels`). The CUDA implementation reads CUPTI activity records.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gs {

struct KernelRecord {
  std::string name;  // as the device reports it (mangled for C++ kernels)
  uint64_t start_ns = 0, end_ns = 0;
  uint32_t graph_id = 0;  // 0 outside a CUDA graph
};

class KernelProfiler {
 public:
  virtual ~KernelProfiler() = default;
  // Starts recording; records of an earlier start() are dropped.
  virtual void start() = 0;
  // Waits for the device, stops recording and returns the kernels in start order. Throws
  // gs::Error when records were lost (the message says how many).
  virtual std::vector<KernelRecord> stop() = 0;
};

}  // namespace gs
