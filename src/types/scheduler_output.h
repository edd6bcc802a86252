// SchedulerOutput: one step's work for the model runner, and what the runner returns.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "types/pooling.h"
#include "types/request_id.h"
#include "types/sampling_params.h"
#include "types/token_logprob.h"

namespace gs {

// One request's share of a step: compute tokens [num_computed_tokens, num_computed_tokens +
// num_new_tokens) of `all_token_ids` followed by `spec_token_ids`, whose KV goes to the blocks in
// `block_ids`. A verification step (speculative decoding) computes the last known token and k
// proposed ones: 1 + k sampled rows, the proposals checked against them (docs/SPEC_DECODE.md).
struct ScheduledRequest {
  RequestId id = 0;
  const std::vector<int32_t>* all_token_ids = nullptr;  // prompt + generated so far
  int num_prompt_tokens = 0;
  int num_computed_tokens = 0;                      // tokens whose KV is already in the cache
  int num_new_tokens = 0;                           // tokens to compute this step (a prefill chunk, or 1 for decode)
  const std::vector<int32_t>* block_ids = nullptr;  // the request's whole block table
  bool sample = false;                              // this step reaches the end of known tokens: sample one
  const SamplingParams* params = nullptr;
  uint64_t seed = 0;                                     // per-request seed (params.seed or one the engine drew)
  int num_output_tokens = 0;                             // tokens generated so far (the sampling step's index)
  int lora_id = 0;                                       // LoRA adapter: 0 the base model, else its id (LoraInputs)
  const std::vector<int32_t>* spec_token_ids = nullptr;  // proposed tokens after all_token_ids (or none)
  // Structured output: the tokens the sampled row may take (Sampler::mask_words() words; bit
  // t % 32 of word t / 32), or null. Such a request has no proposals.
  const std::vector<uint32_t>* bitmask = nullptr;

  // Proposed tokens this step computes (those past the known tokens).
  int num_spec_tokens() const {
    const int known = all_token_ids ? static_cast<int>(all_token_ids->size()) : 0;
    return std::max(0, num_computed_tokens + num_new_tokens - known);
  }
  // Token at `pos`: a known one, else a proposed one.
  int32_t token_at(int pos) const {
    const int known = static_cast<int>(all_token_ids->size());
    return pos < known ? (*all_token_ids)[pos] : (*spec_token_ids)[pos - known];
  }
};

struct SchedulerOutput {
  std::vector<ScheduledRequest> requests;
  int total_tokens() const {
    int n = 0;
    for (const auto& r : requests) n += r.num_new_tokens;
    return n;
  }
};

// A sampled token of request `id`: its token (or a sentinel of types/sampling_limits.h: the row
// could not be sampled), and its logprob and top alternatives when the request asked for them.
struct SampledToken : TokenLogprob {
  RequestId id = 0;
};

// The logprob of the prompt token at `position` (> 0) given the tokens before it.
struct PromptLogprob : TokenLogprob {
  RequestId id = 0;
  int position = 0;
};

struct RunnerOutput {
  // Per ScheduledRequest with sample = true, in order: one token, or with proposals the accepted
  // ones and the token sampled after them (1 + accepted entries of the same id).
  std::vector<SampledToken> sampled;
  // For requests with params->prompt_logprobs >= 0: the prompt positions this step computed.
  std::vector<PromptLogprob> prompt_logprobs;
  // For pooling requests: the hidden-state rows this step pooled (types/pooling.h).
  std::vector<PooledRows> pooled;
};

}  // namespace gs
