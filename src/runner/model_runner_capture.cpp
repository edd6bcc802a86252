// ModelRunner start-up graphs: an eager warm-up, then every key of both sets captured, largest
// first (docs/CUDA_GRAPHS.md §6), with dummy batches of each key's shape; the attention backend plans each FULL
// graph from its key (plan_attention), so replays launch what the capture recorded.
#include <algorithm>
#include <chrono>

#include "core/logging.h"
#include "runner/device_setup.h"
#include "runner/model_runner_impl.h"

namespace gs {

namespace {

// A dummy batch laid out as real ones are (build_host_batch): fresh requests of the given query lengths, token 0
// everywhere, block 0 in every table, and KV written nowhere (slot -1).
HostBatch dummy_batch(const std::vector<int>& query_lens, const HostBatchLimits& limits) {
  const int longest = *std::max_element(query_lens.begin(), query_lens.end());
  const std::vector<int32_t> tokens(size_t(longest), 0);
  const std::vector<int32_t> blocks(size_t((longest + limits.block_size - 1) / limits.block_size), 0);
  SchedulerOutput batch;
  for (int q : query_lens)
    batch.requests.push_back({.all_token_ids = &tokens, .num_new_tokens = q, .block_ids = &blocks});
  HostBatchLimits any_length = limits;  // a mixed key may be longer than max_model_len when max_num_seqs is small
  any_length.max_model_len = std::max(limits.max_model_len, longest);
  HostBatch hb = build_host_batch(batch, any_length);
  std::fill(hb.slot_mapping.begin(), hb.slot_mapping.end(), -1);
  return hb;
}

}  // namespace

// Uniform decode keys: num_reqs requests of q tokens. Mixed keys: the tokens spread over
// min(T, max_num_seqs) requests (BatchDescriptor::request_rows, as vLLM's dummy run).
HostBatch ModelRunner::Impl::stage_dummy(const BatchDescriptor& key, int sample_rows) {
  const int reqs = key.request_rows(max_reqs);
  std::vector<int> lens(size_t(reqs), key.num_tokens / reqs);
  lens.back() += key.num_tokens % reqs;
  HostBatch hb = dummy_batch(lens, host_limits());
  stage(hb, key.num_tokens, sample_rows);
  return hb;
}

void ModelRunner::Impl::eager_dummy_forward(int n) {
  const BatchDescriptor key = BatchDescriptor::mixed(n);
  const HostBatch hb = stage_dummy(key, std::min(n, max_reqs));  // the sampling tail too
  plan_attention(hb, CUDAGraphMode::NONE, key);
  forward(CUDAGraphMode::NONE, key);
}

void ModelRunner::Impl::warm_up() {
  const auto& sizes = dispatcher.capture_sizes();
  const int n = sizes.empty() ? std::min(max_tokens, max_reqs) : sizes.back();
  eager_dummy_forward(n);
  if (lora) {  // the LoRA kernels too (every slot -1), so none is first launched inside a capture
    forward(CUDAGraphMode::NONE, BatchDescriptor::mixed(n, /*has_lora=*/true));
  }
  backend->stream().synchronize();
}

// docs/CUDA_GRAPHS.md §9: the GEMMs of compile_sizes (none by default: the heuristic's choices), timed or
// read from the cache.
void ModelRunner::Impl::tune_gemms() {
  if (!backend->device().is_cuda()) return;  // the CPU has one algorithm
  const CompilationConfig& cc = cfg.compilation;
  GemmTuningOptions opts{
      .sizes = cc.compile_sizes, .use_cache = !cc.disable_compile_cache, .cache_dir = cc.cache_dir, .padded_from = {}};
  if (std::erase_if(opts.sizes, [this](int s) { return s > max_tokens; }) > 0)
    spdlog::warn("compile_sizes above max_num_batched_tokens = {} are not tuned (no step runs them)", max_tokens);
  if (opts.sizes.empty()) return;
  for (const int size : opts.sizes)  // the batches a graph of that size serves
    for (int m = 1; m < size; ++m)
      if (dispatcher.padded_num_tokens(m) == size || dispatcher.padded_mixed_tokens(m) == size)
        opts.padded_from[size].push_back(m);
  // The GEMMs record their largest shapes in the warm-up; larger compile sizes run one eager step more.
  const int largest = *std::max_element(opts.sizes.begin(), opts.sizes.end());
  const auto& sizes = dispatcher.capture_sizes();
  if (largest > (sizes.empty() ? std::min(max_tokens, max_reqs) : sizes.back())) {
    eager_dummy_forward(largest);
    backend->stream().synchronize();
  }
  const GemmTuningReport r = backend->tune_gemms(opts);
  if (r.tuned + r.from_cache == 0) return;
  stats.gemm_tuning_seconds = r.seconds;
  stats.gemm_tuning_cache_hit = r.tuned == 0;
  spdlog::info(
      "GEMM autotune: {} (shape, size) pairs, cache {} ({} read, {} timed, {} not the heuristic's first "
      "choice) in {:.3f} s; {}",
      r.tuned + r.from_cache, r.tuned == 0 ? "hit" : "miss", r.from_cache, r.tuned, r.changed, r.seconds,
      r.cache_file.empty() ? "cache disabled" : "cache " + r.cache_file);
}

void ModelRunner::Impl::capture_all() {
  const auto t0 = std::chrono::steady_clock::now();
  const size_t mem0 = device_memory(*backend).used;
  int keys = 0;
  size_t by_mode[2] = {0, 0};
  for (CUDAGraphMode runtime : {CUDAGraphMode::PIECEWISE, CUDAGraphMode::FULL}) {
    if (!dispatcher.initialized()) break;
    const size_t before = device_memory(*backend).used;
    for (const BatchDescriptor& key : dispatcher.keys(runtime)) {
      // FULL graphs end in the sampler (inert rows); piecewise ones never hold it.
      const HostBatch hb = stage_dummy(key, runtime == CUDAGraphMode::FULL ? graph_tail_rows(key) : 0);
      plan_attention(hb, runtime, key);
      forward(runtime, key);
      ++keys;
    }
    backend->stream().synchronize();
    const size_t after = device_memory(*backend).used;
    by_mode[runtime == CUDAGraphMode::FULL] = after > before ? after - before : 0;
  }
  backend->stream().synchronize();
  const size_t mem1 = device_memory(*backend).used;
  stats.capture_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats.graph_memory_bytes = mem1 > mem0 ? mem1 - mem0 : 0;
  stats.graph_memory_piecewise_bytes = by_mode[0];
  stats.graph_memory_full_bytes = by_mode[1];
  stats.graph_memory_reserved_bytes = graph_reserve.bytes;
  stats.num_graphs = static_cast<int>(total_graphs());
  serving = true;
  constexpr double kMiB = 1024.0 * 1024.0;
  spdlog::info(
      "cudagraph mode {}: captured {} graphs for {} batch shapes in {:.3f} s, graph memory {:.1f} MiB "
      "(PIECEWISE {:.1f}, FULL {:.1f}; {:.1f} MiB reserved)",
      mode_name(stats.resolved_mode), stats.num_graphs, keys, stats.capture_seconds,
      double(stats.graph_memory_bytes) / kMiB, double(by_mode[0]) / kMiB, double(by_mode[1]) / kMiB,
      double(graph_reserve.bytes) / kMiB);
  if (backend->device().is_cuda() && stats.graph_memory_bytes > graph_reserve.bytes)
    spdlog::warn(
        "graph memory {:.1f} MiB exceeds the {:.1f} MiB the memory plan reserved for it "
        "(cudagraph/graph_memory.cpp's estimate is low for this model)",
        double(stats.graph_memory_bytes) / kMiB, double(graph_reserve.bytes) / kMiB);
}

}  // namespace gs
