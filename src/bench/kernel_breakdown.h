// Per-kernel breakdown of profiled steps (`graphserve bench kernels`): the kernel records of
// `steps` steps summed by kernel, per step, with the step's GPU busy time and its idle gaps.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/kernel_profiler.h"

namespace gs {

// Kernels overlap: with programmatic dependent launch a kernel starts before its predecessor
// ends and waits for it. So a kernel's own time (`us_per_step`, `share`) counts only what it adds
// past every earlier-started kernel; these sum to the busy time. `us_per_call` is the whole
// duration, waiting included.
struct KernelBreakdownRow {
  std::string kernel;  // short_kernel_name
  double calls_per_step = 0;
  double us_per_step = 0;  // own time
  double us_per_call = 0;  // mean duration
  double share = 0;        // of the busy time, 0..1
};

struct KernelBreakdown {
  int steps = 0;
  double wall_ms_per_step = 0;             // host-measured step time while profiling
  double kernel_ms_per_step = 0;           // summed kernel durations (overlaps count twice)
  double busy_ms_per_step = 0;             // time at least one kernel ran (the union of the intervals)
  std::vector<KernelBreakdownRow> rows{};  // by own time per step, largest first
};

// `wall_ms` is the host-measured time of all `steps` steps together.
KernelBreakdown summarize_kernels(const std::vector<KernelRecord>& records, int steps, double wall_ms);

// The breakdown as `graphserve bench kernels` prints it: a header line for `batch_size`, then the
// `top` kernels by own time and one line summing the rest.
std::string format_kernel_breakdown(const KernelBreakdown& b, int batch_size, int top);

// A readable kernel name: demangled, without return type, parameters, namespaces gs:: and
// anonymous, at most 90 characters ("gemv_kernel<128, 4>"); non-C++ names (cuBLASLt's) as given.
std::string short_kernel_name(const std::string& device_name);

// The kernel profiler of this build (CUPTI on CUDA), or nullptr with the reason in *why_not.
std::unique_ptr<KernelProfiler> make_kernel_profiler(std::string* why_not);

}  // namespace gs
