// The executor (the in-process runner, or the tensor-parallel worker processes) as the latency
// benchmark (bench/latency_bench.h) drives it: the bench commands' bridge between the engine's
// Executor and the bench library, which sits below the engine.
#pragma once
#include "bench/latency_bench.h"
#include "executor/executor.h"

namespace gs {

inline BenchModel bench_model(Executor& e) {
  return {[&e](const SchedulerOutput& so) { return e.execute(so); },
          [&e] { return e.stats(); },
          e.max_model_len(),
          e.block_size(),
          e.num_kv_blocks(),
          e.model_config().vocab_size};
}

}  // namespace gs
