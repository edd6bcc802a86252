// ForwardContext: the dispatch decision of the forward pass now running (docs/CUDA_GRAPHS.md §4).
//
// The runner publishes it for the duration of one forward with a ForwardContextScope; the graph
// wrappers read it and obey it. It is the one piece of global mutable state the design allows:
// thread-local, set and restored only by the RAII scope.
#pragma once
#include "cudagraph/batch_descriptor.h"
#include "cudagraph/cudagraph_mode.h"

namespace gs {

struct ForwardContext {
  CUDAGraphMode runtime_mode = CUDAGraphMode::NONE;  // NONE, PIECEWISE or FULL
  BatchDescriptor batch;                             // the (padded) dispatch key
  // False once start-up has captured every key: a wrapper asked for a graph it lacks then
  // refuses with an error instead of capturing while serving (vLLM's
  // validate_cudagraph_capturing_enabled).
  bool capture_allowed = true;
};

// The context of the forward running on this thread, or nullptr outside one.
const ForwardContext* current_forward_context();

// Makes `ctx` current until destruction, then restores the previous one (scopes nest).
class ForwardContextScope {
 public:
  explicit ForwardContextScope(const ForwardContext& ctx);
  ~ForwardContextScope();
  ForwardContextScope(const ForwardContextScope&) = delete;
  ForwardContextScope& operator=(const ForwardContextScope&) = delete;

 private:
  ForwardContext ctx_;
  const ForwardContext* previous_;
};

}  // namespace gs
