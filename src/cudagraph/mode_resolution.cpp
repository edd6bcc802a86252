// Implements cudagraph/mode_resolution.h.
#include "cudagraph/mode_resolution.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "core/logging.h"

namespace gs {

BackendCGSupport min_cg_support(const std::vector<BackendCGSupport>& backends) {
  if (backends.empty()) return {"(no attention)", AttentionCGSupport::ALWAYS};
  BackendCGSupport out = backends.front();
  for (const auto& b : backends)
    if (int(b.support) < int(out.support)) out = b;
  return out;
}

namespace {

// Rounds every size up to a multiple of q, drops those beyond the largest requested size.
std::vector<int> round_to_multiples(const std::vector<int>& sizes, int q) {
  if (sizes.empty()) return {};
  const int max_size = *std::max_element(sizes.begin(), sizes.end());
  std::vector<int> out;
  for (int s : sizes) {
    const int r = (s + q - 1) / q * q;
    if (r <= max_size) out.push_back(r);
  }
  if (out.empty()) out.push_back(q);  // every size was below q: keep the one decode shape
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

struct Resolver {
  const BackendCGSupport& min;
  bool piecewise;
  CUDAGraphMode mode;
  std::vector<std::string> warnings;

  void change(CUDAGraphMode to, std::string_view why) {
    std::string msg =
        fmt::format("cudagraph_mode {} -> {}: attention backend '{}' declares cudagraph support {} ({}){}",
                    mode_name(mode), mode_name(to), min.backend, cg_support_name(min.support), why,
                    piecewise ? "" : "; no piecewise split available");
    spdlog::warn("{}", msg);
    warnings.push_back(std::move(msg));
    mode = to;
  }
  CUDAGraphMode pw_or(CUDAGraphMode fallback) const { return piecewise ? CUDAGraphMode::PIECEWISE : fallback; }
};

}  // namespace

ModeResolution resolve_cudagraph_mode(CUDAGraphMode requested, const BackendCGSupport& min_support, bool piecewise,
                                      int uniform_query_len, std::vector<int> capture_sizes) {
  GS_CHECK(uniform_query_len >= 1, "uniform_query_len must be >= 1, got {}", uniform_query_len);
  using M = CUDAGraphMode;
  using S = AttentionCGSupport;
  Resolver r{min_support, piecewise, requested, {}};
  const S min = min_support.support;

  // docs/CUDA_GRAPHS.md §7, rules 1-5 in order.
  // 1. No piecewise split: the piecewise members cannot exist (vLLM, empty splitting ops).
  if (!piecewise && r.mode == M::PIECEWISE) r.change(M::NONE, "the model has no piecewise split");
  if (!piecewise && r.mode == M::FULL_AND_PIECEWISE) r.change(M::FULL, "the model has no piecewise split");
  // 2. Full graphs of mixed batches need ALWAYS. (vLLM raises on NEVER; we downgrade and let 3 apply.)
  if (mixed_mode(r.mode) == M::FULL && min != S::ALWAYS)
    r.change(piecewise ? M::FULL_AND_PIECEWISE : M::FULL_DECODE_ONLY,
             "full graphs of mixed prefill/decode batches need ALWAYS");
  // 3. No full graphs at all.
  if (decode_mode(r.mode) == M::FULL && min == S::NEVER) r.change(r.pw_or(M::NONE), "no full graphs are supported");
  // 4. Speculative decoding: uniform batches of q > 1 need UNIFORM_BATCH.
  if (decode_mode(r.mode) == M::FULL && uniform_query_len > 1 && int(min) < int(S::UNIFORM_BATCH))
    r.change(r.pw_or(M::NONE),
             fmt::format("full decode graphs of query length {} need UNIFORM_BATCH", uniform_query_len));

  ModeResolution out;
  out.mode = r.mode;
  std::sort(capture_sizes.begin(), capture_sizes.end());
  capture_sizes.erase(std::unique(capture_sizes.begin(), capture_sizes.end()), capture_sizes.end());
  // 5. Separate decode graphs of q > 1 tokens per request: sizes must be multiples of q.
  if (separate_routine(out.mode) && decode_mode(out.mode) == M::FULL && uniform_query_len > 1)
    capture_sizes = round_to_multiples(capture_sizes, uniform_query_len);
  out.capture_sizes = std::move(capture_sizes);
  out.warnings = std::move(r.warnings);
  return out;
}

}  // namespace gs
