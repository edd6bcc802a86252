// CUDAGraphWrapper: runs a callable through graphs of one runtime mode (docs/CUDA_GRAPHS.md §5).
//
// Bound to FULL or PIECEWISE. On each call it reads the forward context: on NONE or another
// runtime mode it calls the callable directly; otherwise it replays the graph cached for the
// context's descriptor, capturing it on first use (capture records, so the new graph is then
// replayed once to produce this call's output) while the context allows capture, and refusing
// with an error naming the descriptor once it does not. It keeps no policy of its own.
#pragma once
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/stream.h"
#include "cudagraph/batch_descriptor.h"
#include "cudagraph/cudagraph_mode.h"

namespace gs {

#ifdef NDEBUG
inline constexpr bool kCheckGraphInputAddresses = false;
#else
inline constexpr bool kCheckGraphInputAddresses = true;
#endif

class CUDAGraphWrapper {
 public:
  using Fn = std::function<void()>;
  struct Options {
    std::string name = "graph";  // for messages, e.g. "piece 3"
    // Record the inputs' addresses at capture and check them at every replay (a changed address
    // means a stale graph reading the wrong memory). On by default in debug builds.
    bool check_addresses = kCheckGraphInputAddresses;
  };

  CUDAGraphWrapper(Fn fn, CUDAGraphMode runtime_mode, Stream& stream, Options opts);
  CUDAGraphWrapper(Fn fn, CUDAGraphMode runtime_mode, Stream& stream)
      : CUDAGraphWrapper(std::move(fn), runtime_mode, stream, Options{}) {}

  // `inputs`: the addresses the callable reads its per-step inputs from (checked, see Options).
  void operator()(std::span<const void* const> inputs = {});

  CUDAGraphMode runtime_mode() const { return mode_; }
  int num_captures() const { return captures_; }
  int num_replays() const { return replays_; }
  int num_refused() const { return refused_; }  // captures refused (the context allowed none)
  size_t num_graphs() const { return graphs_.size(); }
  bool has_graph(const BatchDescriptor& d) const { return graphs_.contains(d); }
  size_t num_graph_nodes() const;  // over all cached graphs

 private:
  struct Entry {
    std::unique_ptr<Graph> graph;
    std::vector<const void*> inputs;
  };
  void capture(const BatchDescriptor& key, std::span<const void* const> inputs);
  void check_inputs(const BatchDescriptor& key, const Entry& e, std::span<const void* const> inputs) const;

  Fn fn_;
  CUDAGraphMode mode_;
  Stream& stream_;
  Options opts_;
  std::unordered_map<BatchDescriptor, Entry, BatchDescriptorHash> graphs_;
  int captures_ = 0;
  int replays_ = 0;
  int refused_ = 0;
};

}  // namespace gs
