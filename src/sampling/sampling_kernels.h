// SamplingKernels: the two device operations of sampling, behind one interface per backend
// (the CPU reference and CUDA), both enqueued on the backend's stream and graph-capturable.
#pragma once
#include <cstdint>
#include <memory>

#include "ops/backend.h"
#include "sampling/sampling_row.h"

namespace gs {

// Raw pointers into the sampler's persistent buffers (on the backend's device).
struct SampleArgs {
  float* logits = nullptr;  // [n, vocab] f32; rows with penalties or adjustments are changed in place
  int n = 0;
  int vocab = 0;
  const SamplingRow* rows = nullptr;             // [n]
  const LogitAdjustment* adjustments = nullptr;  // indexed by rows[i].adjust_begin .. adjust_end
  int32_t* counts = nullptr;                     // [slots, vocab] output-token counts (updated)
  const uint32_t* prompt_mask = nullptr;         // [slots, mask_words] prompt-token bits
  int mask_words = 0;
  // [rows, mask_words] allowed tokens (bit t % 32 of word t / 32) of rows with bitmask_row >= 0:
  // the others' logits become -inf after the penalties and adjustments.
  const uint32_t* bitmask = nullptr;
  int32_t* sampled = nullptr;  // [n] the tokens
  float* logprob = nullptr;    // [n] the sampled tokens' raw logprobs
  int32_t* top_ids = nullptr;  // [n, kMaxTopLogprobs] the best tokens, best first (-1 where fewer exist)
  float* top_lps = nullptr;    // [n, kMaxTopLogprobs]: their logprobs
};

// One penalty slot rebuilt from a request's tokens: counts of its output tokens, bits of its
// prompt tokens. Token ids outside [0, vocab) are ignored.
struct SlotArgs {
  int32_t* counts = nullptr;        // the slot's row, [vocab]
  uint32_t* prompt_mask = nullptr;  // the slot's row, [mask_words]
  int vocab = 0;
  int mask_words = 0;
  const int32_t* tokens = nullptr;  // prompt tokens, then output tokens
  int num_prompt = 0;
  int num_tokens = 0;
};

class SamplingKernels {
 public:
  virtual ~SamplingKernels() = default;
  // Picks one token per row by the rule in sampler.h; increments counts[slot, token] of rows
  // with a penalty slot.
  virtual void sample(const SampleArgs& a) = 0;
  virtual void reset_slot(const SlotArgs& a) = 0;
};

// The CPU reference; `backend` must be the CPU backend (its stream records the kernels).
std::unique_ptr<SamplingKernels> make_cpu_sampling_kernels(Backend& backend);

}  // namespace gs
