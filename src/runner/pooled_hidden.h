// The pooling requests' share of one step's final hidden states (see types/pooling.h).
#pragma once
#include <vector>

#include "core/tensor.h"
#include "ops/backend.h"
#include "runner/host_batch.h"
#include "types/pooling.h"

namespace gs {

// `hidden` [tokens, H] holds the forward's final hidden states in `hb`'s row order. Returns one
// entry per request of `batch` whose params ask for pooling and that has rows to pool this step.
std::vector<PooledRows> pool_hidden_rows(Backend& backend, const Tensor& hidden, const SchedulerOutput& batch,
                                         const HostBatch& hb);

}  // namespace gs
