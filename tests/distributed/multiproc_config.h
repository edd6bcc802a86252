// The engine the worker-process tests run: stories260K on the CPU at tp ranks (workers are
// graphserve processes), small batches, FULL_AND_PIECEWISE graphs.
#pragma once
#include <cstdlib>

#include "engine/llm_engine.h"
#include "test_paths.h"

namespace gs::test {

inline EngineConfig multiproc_stories_config(int tp) {
  setenv("GRAPHSERVE_EXE", graphserve_exe().c_str(), 1);
  EngineConfig c;
  c.model = stories260k_dir().string();
  c.device = "cpu";
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = 32;
  c.kv_cache_memory_bytes = size_t(4) << 20;
  c.compilation.cudagraph_mode = CUDAGraphMode::FULL_AND_PIECEWISE;
  c.compilation.cudagraph_capture_sizes = {1, 2, 4, 8};
  c.tensor_parallel_size = tp;
  return c;
}

}  // namespace gs::test
