// CudagraphDispatcher: the single source of truth for which graph (if any) runs a batch (docs/CUDA_GRAPHS.md §4).
//
// Holds the keys valid for FULL graphs and those valid for PIECEWISE graphs; dispatch() pads a
// batch to a capture size and picks FULL > PIECEWISE > NONE exactly as docs/CUDA_GRAPHS.md §4 says.
#pragma once
#include <unordered_set>
#include <utility>
#include <vector>

#include "cudagraph/batch_descriptor.h"
#include "cudagraph/cudagraph_mode.h"

namespace gs {

class CudagraphDispatcher {
 public:
  // Fills both key sets from the (resolved) mode; called once, after the attention backends
  // exist and the mode is resolved. `capture_sizes` need not be sorted.
  // With enable_lora every key also exists with has_lora = true (captured beside the plain one).
  // `mixed_sizes` (empty: capture_sizes) are the sizes of the mixed keys when the mixed member is
  // PIECEWISE (piecewise_capture_sizes: a sparser ladder than the FULL decode keys, §8); mixed
  // batches pad to them.
  void initialize_cudagraph_keys(CUDAGraphMode mode, const std::vector<int>& capture_sizes, int uniform_query_len,
                                 int max_num_seqs, bool enable_lora = false, std::vector<int> mixed_sizes = {});

  // (runtime mode, final descriptor). `desc.num_tokens` is padded to the smallest capture size
  // >= it first (a no-op when already padded); NONE returns `desc` unpadded. A batch that uses
  // cascade attention (attention/cascade.h) never replays a FULL graph, whose attention was
  // captured without it: PIECEWISE if its mixed key exists, else NONE (docs/CUDA_GRAPHS.md §4).
  std::pair<CUDAGraphMode, BatchDescriptor> dispatch(const BatchDescriptor& desc, bool use_cascade_attn = false) const;

  // The smallest capture size >= num_tokens, or num_tokens when none is that large.
  int padded_num_tokens(int num_tokens) const;
  // The same on the ladder of the mixed (piecewise) keys.
  int padded_mixed_tokens(int num_tokens) const;
  // `desc` with num_tokens padded (and num_reqs of a uniform batch recomputed from it).
  BatchDescriptor pad(const BatchDescriptor& desc) const;

  // The keys of one runtime mode (FULL or PIECEWISE), largest num_tokens first (capture order).
  std::vector<BatchDescriptor> keys(CUDAGraphMode runtime_mode) const;
  bool initialized() const { return initialized_; }
  CUDAGraphMode mode() const { return mode_; }
  const std::vector<int>& capture_sizes() const { return sizes_; }
  const std::vector<int>& mixed_capture_sizes() const { return mixed_sizes_; }

 private:
  using KeySet = std::unordered_set<BatchDescriptor, BatchDescriptorHash>;
  // The key set of a runtime mode (FULL or PIECEWISE; others are an error), const or not as `self` is.
  template <class Self>
  static auto& set_of(Self& self, CUDAGraphMode runtime_mode);

  bool initialized_ = false;
  CUDAGraphMode mode_ = CUDAGraphMode::NONE;
  std::vector<int> sizes_;        // ascending
  std::vector<int> mixed_sizes_;  // ascending: the mixed keys' ladder
  KeySet full_keys_, piecewise_keys_;
};

}  // namespace gs
