// Implements cudagraph/cudagraph_wrapper.h (CUDAGraphWrapper).
#include "cudagraph/cudagraph_wrapper.h"

#include "core/error.h"
#include "cudagraph/forward_context.h"

namespace gs {

CUDAGraphWrapper::CUDAGraphWrapper(Fn fn, CUDAGraphMode runtime_mode, Stream& stream, Options opts)
    : fn_(std::move(fn)), mode_(runtime_mode), stream_(stream), opts_(std::move(opts)) {
  GS_CHECK(mode_ == CUDAGraphMode::FULL || mode_ == CUDAGraphMode::PIECEWISE,
           "CUDAGraphWrapper '{}' must be bound to FULL or PIECEWISE, not {}", opts_.name, mode_name(mode_));
  GS_CHECK(fn_ != nullptr, "CUDAGraphWrapper '{}': no callable", opts_.name);
}

void CUDAGraphWrapper::operator()(std::span<const void* const> inputs) {
  const ForwardContext* ctx = current_forward_context();
  if (ctx == nullptr || ctx->runtime_mode != mode_) {
    fn_();  // NONE, or the other runtime mode: not ours to capture
    return;
  }
  auto it = graphs_.find(ctx->batch);
  if (it == graphs_.end()) {
    if (!ctx->capture_allowed) {
      ++refused_;
      fail(
          "CUDAGraphWrapper '{}': no {} graph for {}, and capturing is closed once start-up has captured "
          "every key: the capture sizes and the dispatcher disagree",
          opts_.name, mode_name(mode_), ctx->batch.str());
    }
    capture(ctx->batch, inputs);
    it = graphs_.find(ctx->batch);
  } else {
    if (opts_.check_addresses) check_inputs(ctx->batch, it->second, inputs);
    ++replays_;
  }
  it->second.graph->replay();
}

void CUDAGraphWrapper::capture(const BatchDescriptor& key, std::span<const void* const> inputs) {
  stream_.begin_capture();
  try {
    fn_();
  } catch (...) {
    stream_.end_capture();  // leave the stream usable; the partial graph is dropped
    throw;
  }
  Entry e{stream_.end_capture(), std::vector<const void*>(inputs.begin(), inputs.end())};
  graphs_.emplace(key, std::move(e));
  ++captures_;
}

void CUDAGraphWrapper::check_inputs(const BatchDescriptor& key, const Entry& e,
                                    std::span<const void* const> inputs) const {
  GS_CHECK(inputs.size() == e.inputs.size(), "CUDAGraphWrapper '{}': {} inputs at replay of {} but {} at capture",
           opts_.name, inputs.size(), key.str(), e.inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    GS_CHECK(inputs[i] == e.inputs[i],
             "CUDAGraphWrapper '{}': input {} is at {} but the graph for {} was captured reading {}; "
             "a graph's inputs must stay in the same persistent buffers between replays",
             opts_.name, i, fmt::ptr(inputs[i]), key.str(), fmt::ptr(e.inputs[i]));
  }
}

size_t CUDAGraphWrapper::num_graph_nodes() const {
  size_t n = 0;
  for (const auto& [k, e] : graphs_) n += e.graph->num_nodes();
  return n;
}

}  // namespace gs
