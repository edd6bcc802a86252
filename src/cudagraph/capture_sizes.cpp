// Implements cudagraph/capture_sizes.h.
#include "cudagraph/capture_sizes.h"

#include <algorithm>

#include "core/error.h"
#include "core/logging.h"

namespace gs {

std::vector<int> default_capture_sizes(int max_size) {
  std::vector<int> out;
  for (int s : {1, 2, 4})
    if (s <= max_size) out.push_back(s);
  for (int s = 8; s <= max_size; s += 8) out.push_back(s);
  return out;
}

std::vector<int> resolve_capture_sizes(const CompilationConfig& cfg, int max_num_seqs, int max_num_batched_tokens) {
  GS_CHECK(max_num_seqs >= 1, "max_num_seqs must be >= 1, got {}", max_num_seqs);
  GS_CHECK(max_num_batched_tokens >= 1, "max_num_batched_tokens must be >= 1, got {}", max_num_batched_tokens);
  if (cfg.cudagraph_mode == CUDAGraphMode::NONE) return {};  // (unset: the caller resolved no NONE)
  std::vector<int> sizes;
  if (!cfg.cudagraph_capture_sizes.empty()) {
    sizes = cfg.cudagraph_capture_sizes;
    if (cfg.max_cudagraph_capture_size > 0)
      std::erase_if(sizes, [&](int s) { return s > cfg.max_cudagraph_capture_size; });
  } else {
    const int max_size =
        cfg.max_cudagraph_capture_size > 0 ? cfg.max_cudagraph_capture_size : std::min(max_num_seqs * 2, 256);
    sizes = default_capture_sizes(max_size);
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  const size_t before = sizes.size();
  std::erase_if(sizes, [&](int s) { return s > max_num_batched_tokens; });
  if (sizes.size() != before)
    spdlog::info("dropped {} capture sizes above max_num_batched_tokens = {}", before - sizes.size(),
                 max_num_batched_tokens);
  return sizes;
}

std::vector<int> piecewise_capture_sizes(CUDAGraphMode mode, const std::vector<int>& capture_sizes, bool dense) {
  if (dense || mode != CUDAGraphMode::FULL_AND_PIECEWISE || capture_sizes.empty()) return capture_sizes;
  std::vector<int> out;
  for (int s : capture_sizes)
    if (s >= 8 && (s & (s - 1)) == 0) out.push_back(s);
  if (out.empty() || out.back() != capture_sizes.back()) out.push_back(capture_sizes.back());
  return out;
}

}  // namespace gs
