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

void ModelRunner::Impl::warm_up() {
  const auto& sizes = dispatcher.capture_sizes();
  const int n = sizes.empty() ? std::min(max_tokens, max_reqs) : sizes.back();
  const BatchDescriptor key = BatchDescriptor::mixed(n);
  const HostBatch hb = stage_dummy(key, std::min(n, max_reqs));  // the sampling tail too
  plan_attention(hb, CUDAGraphMode::NONE, key);
  forward(CUDAGraphMode::NONE, key);
  if (lora) {  // the LoRA kernels too (every slot -1), so none is first launched inside a capture
    forward(CUDAGraphMode::NONE, BatchDescriptor::mixed(n, /*has_lora=*/true));
  }
  backend->stream().synchronize();
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
  stats.num_graphs = static_cast<int>(total_graphs());
  serving = true;
  spdlog::info(
      "cudagraph mode {}: captured {} graphs for {} batch shapes in {:.3f} s, graph memory {:.1f} MiB "
      "(PIECEWISE {:.1f}, FULL {:.1f})",
      mode_name(stats.resolved_mode), stats.num_graphs, keys, stats.capture_seconds,
      double(stats.graph_memory_bytes) / (1024.0 * 1024.0), double(by_mode[0]) / (1024.0 * 1024.0),
      double(by_mode[1]) / (1024.0 * 1024.0));
}

}  // namespace gs
