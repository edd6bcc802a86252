// Implements cudagraph/cudagraph_dispatcher.h (CudagraphDispatcher).
#include "cudagraph/cudagraph_dispatcher.h"

#include <algorithm>

#include "core/error.h"

namespace gs {

template <class Self>
auto& CudagraphDispatcher::set_of(Self& self, CUDAGraphMode runtime_mode) {
  GS_CHECK(runtime_mode == CUDAGraphMode::FULL || runtime_mode == CUDAGraphMode::PIECEWISE,
           "graph keys exist only for runtime modes FULL and PIECEWISE, not {}", mode_name(runtime_mode));
  return runtime_mode == CUDAGraphMode::FULL ? self.full_keys_ : self.piecewise_keys_;
}

namespace {

std::vector<int> sorted_unique(std::vector<int> v) {
  for (int s : v) GS_CHECK(s >= 1, "capture sizes must be >= 1, got {}", s);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

int pad_to(const std::vector<int>& ladder, int num_tokens) {
  auto it = std::lower_bound(ladder.begin(), ladder.end(), num_tokens);
  return it == ladder.end() ? num_tokens : *it;
}

}  // namespace

void CudagraphDispatcher::initialize_cudagraph_keys(CUDAGraphMode mode, const std::vector<int>& capture_sizes,
                                                    int uniform_query_len, int max_num_seqs, bool enable_lora,
                                                    std::vector<int> mixed_sizes) {
  GS_CHECK(uniform_query_len >= 1, "uniform_query_len must be >= 1, got {}", uniform_query_len);
  mode_ = mode;
  sizes_ = sorted_unique(capture_sizes);
  const bool sparse = mixed_mode(mode) == CUDAGraphMode::PIECEWISE && !mixed_sizes.empty();
  mixed_sizes_ = sparse ? sorted_unique(std::move(mixed_sizes)) : sizes_;
  full_keys_.clear();
  piecewise_keys_.clear();

  if (mixed_mode(mode) != CUDAGraphMode::NONE) {
    for (int s : mixed_sizes_) set_of(*this, mixed_mode(mode)).insert(BatchDescriptor::mixed(s));
  }
  if (decode_mode(mode) == CUDAGraphMode::FULL && separate_routine(mode)) {
    const long long max_tokens = static_cast<long long>(uniform_query_len) * max_num_seqs;
    for (int s : sizes_) {
      if (s >= uniform_query_len && s <= max_tokens)
        full_keys_.insert(BatchDescriptor::uniform_decode(s, uniform_query_len));
    }
  }
  if (enable_lora)
    for (KeySet* set : {&full_keys_, &piecewise_keys_}) {
      const std::vector<BatchDescriptor> plain(set->begin(), set->end());
      for (BatchDescriptor k : plain) {
        k.has_lora = true;
        set->insert(k);
      }
    }
  initialized_ = true;
}

int CudagraphDispatcher::padded_num_tokens(int num_tokens) const { return pad_to(sizes_, num_tokens); }

int CudagraphDispatcher::padded_mixed_tokens(int num_tokens) const { return pad_to(mixed_sizes_, num_tokens); }

BatchDescriptor CudagraphDispatcher::pad(const BatchDescriptor& desc) const {
  BatchDescriptor out = desc;
  out.num_tokens = padded_num_tokens(desc.num_tokens);
  if (out.uniform && out.uniform_query_len > 0) out.num_reqs = out.num_tokens / out.uniform_query_len;
  return out;
}

std::pair<CUDAGraphMode, BatchDescriptor> CudagraphDispatcher::dispatch(const BatchDescriptor& desc,
                                                                        bool use_cascade_attn) const {
  if (!initialized_) return {CUDAGraphMode::NONE, desc};
  if (!use_cascade_attn) {
    const BatchDescriptor padded = pad(desc);
    const BatchDescriptor relaxed = padded.non_uniform();
    if (full_keys_.contains(padded)) return {CUDAGraphMode::FULL, padded};
    if (full_keys_.contains(relaxed)) return {CUDAGraphMode::FULL, relaxed};
  }
  BatchDescriptor mixed = desc.non_uniform();
  mixed.num_tokens = padded_mixed_tokens(desc.num_tokens);
  if (piecewise_keys_.contains(mixed)) return {CUDAGraphMode::PIECEWISE, mixed};
  return {CUDAGraphMode::NONE, desc};
}

std::vector<BatchDescriptor> CudagraphDispatcher::keys(CUDAGraphMode runtime_mode) const {
  const KeySet& set = set_of(*this, runtime_mode);
  std::vector<BatchDescriptor> out(set.begin(), set.end());
  std::sort(out.begin(), out.end(), [](const BatchDescriptor& a, const BatchDescriptor& b) {
    if (a.num_tokens != b.num_tokens) return a.num_tokens > b.num_tokens;
    if (a.uniform != b.uniform) return a.uniform < b.uniform;
    return a.has_lora < b.has_lora;
  });
  return out;
}

}  // namespace gs
