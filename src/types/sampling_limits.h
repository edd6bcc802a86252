// The limits a request's sampling parameters meet and the sentinels a sampled token may be:
// shared by the request types (SamplingParams, SampledToken) and the sampler's device rows
// (sampling/sampling_row.h), which both compilers read.
#pragma once
#include <cstdint>

namespace gs {

// Temperatures below this are greedy (argmax), as vLLM's _SAMPLING_EPS: 1 / T would overflow.
constexpr float kGreedyTemperature = 1e-5f;
// Most top logprobs a row can ask for (the OpenAI API's limit).
constexpr int kMaxTopLogprobs = 20;
// Most logit adjustments (logit_bias entries and min_tokens masks) one row may carry.
constexpr int kMaxAdjustmentsPerRow = 1024;
// Sampled ids that are not tokens: the row could not be sampled, and its request fails.
constexpr int32_t kNonFiniteLogits = -1;    // a logit was NaN or +inf (the model's numerics broke down)
constexpr int32_t kNoSampleableToken = -2;  // every logit was -inf once masked: no token may follow

}  // namespace gs
