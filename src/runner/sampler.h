// Sampler: picks each request's next token from its logits on the host.
//
// Penalties, temperature, top-k, top-p, min-p, then a draw from a generator seeded by
// (request seed, output index), so a request samples the same tokens whether it ran alone,
// batched or preempted. Greedy requests take the argmax (ties: the lowest id).
#pragma once
#include <span>
#include <vector>

#include "runner/scheduler_output.h"

namespace gs {

// logits: row i (vocab_size floats) belongs to reqs[i]. Rows may be modified in place.
std::vector<SampledToken> sample_tokens(float* logits, int vocab_size,
                                        std::span<const ScheduledRequest* const> reqs);

}  // namespace gs
