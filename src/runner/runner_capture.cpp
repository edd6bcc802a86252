// ModelRunner start-up graphs: an eager warm-up, then every key of both sets captured, largest
// first (docs/CUDA_GRAPHS.md §6), with dummy batches whose metadata makes attention launch the same kernels as
// real batches of that kind.
#include <algorithm>
#include <chrono>

#include "core/logging.h"
#include "runner/device_setup.h"
#include "runner/model_runner_impl.h"

namespace gs {

namespace {

// A dummy batch of `num_reqs` requests of the given query lengths: fresh sequences (context =
// the new tokens), token 0 everywhere, KV written nowhere (slot -1), block 0 in every table.
HostBatch dummy_batch(const std::vector<int>& query_lens, int max_blocks_per_req) {
  HostBatch hb;
  hb.num_reqs = static_cast<int>(query_lens.size());
  hb.query_start_loc.push_back(0);
  for (int q : query_lens) {
    for (int p = 0; p < q; ++p) {
      hb.input_ids.push_back(0);
      hb.positions.push_back(p);
      hb.slot_mapping.push_back(-1);
    }
    hb.query_start_loc.push_back(static_cast<int32_t>(hb.input_ids.size()));
    hb.seq_lens.push_back(q);
    hb.max_query_len = std::max(hb.max_query_len, q);
    hb.max_seq_len = std::max(hb.max_seq_len, q);
  }
  hb.block_table.assign(size_t(hb.num_reqs) * max_blocks_per_req, 0);
  hb.num_actual_tokens = static_cast<int>(hb.input_ids.size());
  return hb;
}

}  // namespace

// Uniform decode keys: num_reqs requests of q tokens. Mixed keys: the tokens spread over
// min(T, max_num_seqs) requests (as vLLM's dummy run), metadata saying max_query_len = T.
HostBatch ModelRunner::Impl::stage_dummy(const BatchDescriptor& key, int sample_rows) {
  std::vector<int> lens;
  if (key.uniform) {
    lens.assign(key.num_reqs, key.uniform_query_len);
  } else {
    const int reqs = std::min(key.num_tokens, max_reqs);
    lens.assign(reqs, key.num_tokens / reqs);
    lens.back() += key.num_tokens % reqs;
  }
  HostBatch hb = dummy_batch(lens, max_blocks_per_req);
  stage(hb, key.num_tokens, sample_rows);
  return hb;
}

void ModelRunner::Impl::warm_up() {
  const auto& sizes = dispatcher.capture_sizes();
  const int n = sizes.empty() ? std::min(max_tokens, max_reqs) : sizes.back();
  const BatchDescriptor key = BatchDescriptor::mixed(n);
  const HostBatch hb = stage_dummy(key, std::min(n, max_reqs));  // the sampling tail too
  set_metadata(hb, CUDAGraphMode::NONE, key);
  forward(CUDAGraphMode::NONE, key);
  if (lora) {  // the LoRA kernels too (every slot -1), so none is first launched inside a capture
    const BatchDescriptor lora_key{n, 0, false, true, 0};
    forward(CUDAGraphMode::NONE, lora_key);
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
      const HostBatch hb = stage_dummy(key, runtime == CUDAGraphMode::FULL ? graph_sample_rows(key) : 0);
      set_metadata(hb, runtime, key);
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
