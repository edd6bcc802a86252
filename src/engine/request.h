// Request: the scheduler's view of one generation request (tokens, progress, KV blocks).
#pragma once
#include <cstdint>
#include <vector>

#include "kv/block_table.h"
#include "types/sampling_params.h"
#include "types/scheduler_output.h"

namespace gs {

enum class RequestStatus { Waiting, Running, Finished };

struct Request {
  RequestId id = 0;
  uint64_t arrival = 0;         // FCFS order (the engine's request counter)
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int num_prompt_tokens = 0;
  int num_computed_tokens = 0;  // tokens whose KV is in the cache
  // Resolved parameters: the model's eos ids are added to stop_token_ids unless ignore_eos,
  // so the sampler's min_tokens masking covers them.
  SamplingParams params;
  uint64_t seed = 0;
  BlockTable blocks;
  std::vector<uint64_t> block_hashes;  // prefix hash of each full block of `tokens`
  int num_registered_blocks = 0;       // leading blocks already offered to the prefix cache
  RequestStatus status = RequestStatus::Waiting;
  int num_preemptions = 0;
  int lora_id = 0;  // 0: the base model, else 1 + the adapter's index in --lora-modules
  // Proposed next tokens (speculative decoding), set before a step; the scheduler may shorten them.
  std::vector<int32_t> spec_token_ids;

  int num_tokens() const { return static_cast<int>(tokens.size()); }
  int num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
};

}  // namespace gs
