// The CUPTI kernel profiler (core/kernel_profiler.h). CUPTI is loaded at run time
// (libcupti.so.13 from the library path or the CUDA toolkit), so graphserve runs without it.
#pragma once
#include <memory>
#include <string>

#include "core/kernel_profiler.h"

namespace gs {

// A profiler, or nullptr with the reason in *why_not (CUPTI not found, or in use by another tool).
// At most one exists at a time.
std::unique_ptr<KernelProfiler> make_cupti_profiler(std::string* why_not);

}  // namespace gs
