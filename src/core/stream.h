// Stream and Graph: an ordered queue of kernels, and a recorded sequence of them.
//
// On CUDA these are a cudaStream_t and an instantiated cudaGraphExec_t. On the CPU a captured
// graph is the list of launched kernels as closures over raw pointers; replay runs them in order.
// The semantics are the same on both, which is what lets CI test every graph path on the CPU:
//  - a graph bakes in every address and size it was captured with;
//  - inputs must be copied into persistent buffers before replay, outputs read after;
//  - nothing may allocate while capturing (the allocator's capture guard throws);
//  - kernels launched during capture are recorded, not run.
#pragma once
#include <cstddef>
#include <memory>

#include "core/device.h"

namespace gs {

class Graph {
 public:
  virtual ~Graph() = default;
  virtual void replay() = 0;
  virtual size_t num_nodes() const = 0;
};

class Stream {
 public:
  virtual ~Stream() = default;
  virtual Device device() const = 0;
  virtual void begin_capture() = 0;
  virtual std::unique_ptr<Graph> end_capture() = 0;
  virtual bool capturing() const = 0;
  virtual void synchronize() = 0;
};

}  // namespace gs
