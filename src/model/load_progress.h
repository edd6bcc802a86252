// Load progress: a WeightSource wrapper that reports how far a model's load has come (bytes and
// tensors against the expected total): a progress bar redrawn in place when stderr is a
// terminal, else at most one log line a second, and a summary line at the end.
#pragma once
#include <cstdint>
#include <memory>

#include "model/weight_source.h"

namespace gs {

// `expected_bytes`: what the whole load should write (0: unknown, no percentage), counting every
// weight at `weight_bytes` a value (the compute dtype's size), whatever dtype a load stages it in
// (FP8 weights pass through f32 before their quantization).
std::unique_ptr<WeightSource> with_load_progress(std::unique_ptr<WeightSource> inner, int64_t expected_bytes,
                                                 int64_t weight_bytes);

}  // namespace gs
