// SamplingRow: one logits row's sampling parameters, as the device reads them.
//
// The runner writes one row per sampled request (and inert rows for a graph's padding) into
// a persistent buffer before every forward, so a captured graph samples with whatever the
// rows hold at replay. The layout is plain data shared by the host and both kernels.
#pragma once
#include <cstdint>

#include "core/host_device.h"
#include "types/sampling_limits.h"

namespace gs {

struct SamplingRow {
  float temperature = 0.0f;                  // < kGreedyTemperature: greedy
  int32_t top_k = 0;                         // <= 0: off
  float top_p = 1.0f;                        // >= 1: off
  float min_p = 0.0f;                        // <= 0: off
  uint32_t seed_lo = 0, seed_hi = 0;         // the request's seed: draws depend on (seed, step, token)
  int32_t step = 0;                          // the output index being sampled
  int32_t penalty_slot = -1;                 // row of the penalty state; -1: no penalties
  float repetition_penalty = 1.0f;           // over prompt and output tokens (HF)
  float presence_penalty = 0.0f;             // over output tokens (OpenAI)
  float frequency_penalty = 0.0f;            // over output tokens (OpenAI)
  int32_t num_logprobs = -1;                 // -1: none; 0..kMaxTopLogprobs: the sampled token's + top ones
  int32_t adjust_begin = 0, adjust_end = 0;  // this row's range of the adjustment list
  int32_t target_token = -1;  // >= 0: report this token's logprob, not the sampled one's (prompt logprobs)
  int32_t bitmask_row = -1;   // >= 0: this row's allowed-token bitmask (structured output); -1: none

  GS_HD bool greedy() const { return !(temperature >= kGreedyTemperature); }  // NaN: greedy
  GS_HD bool has_penalties() const { return penalty_slot >= 0; }
};
static_assert(sizeof(SamplingRow) == 64, "SamplingRow is read by the device as 16 words");

// A sparse change of one logit, applied after the penalties: logit += value (-inf masks it).
// A row's adjustments name each token at most once (the runner merges them).
struct LogitAdjustment {
  int32_t token = 0;
  float value = 0.0f;
};
static_assert(sizeof(LogitAdjustment) == 8);

}  // namespace gs
