// Sampler: turns a batch's logits into token ids on the logits' device, inside the graphs.
//
// It owns persistent buffers: one SamplingRow and a range of LogitAdjustments per row (written
// before every forward by stage()), the penalty state (per slot: output-token counts and a
// bit per prompt token, updated by each sampled token on the device and rebuilt from the host
// only when a request gets a slot), and the outputs (ids, logprobs). sample() enqueues one
// kernel and is capturable; per step only the ids (and logprobs a request asked for) cross to
// the host. The rule it samples by is in sampling_rule.h.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "ops/backend.h"
#include "sampling/sampling_kernels.h"
#include "sampling/sampling_row.h"
#include "types/token_logprob.h"

namespace gs {

struct SamplerLimits {
  int max_rows = 0;  // rows one sample() handles (max_num_seqs)
  int vocab = 0;
  int num_slots = 0;   // penalty slots (requests with penalties sampled in one step at most)
  int max_tokens = 0;  // most tokens one reset_slot() receives (max_model_len)
};

class Sampler {
 public:
  Sampler(Backend& backend, std::unique_ptr<SamplingKernels> kernels, const SamplerLimits& limits);

  // Copies the rows' parameters and adjustments into the persistent buffers (outside capture).
  // rows.size() <= max_rows; each row's adjustments lie in [adjust_begin, adjust_end) of
  // `adjustments`, at most kMaxAdjustmentsPerRow of them. `bitmasks` holds mask_words() words
  // for each bitmask_row the rows name (structured output; rows without one pay nothing).
  void stage(std::span<const SamplingRow> rows, std::span<const LogitAdjustment> adjustments,
             std::span<const uint32_t> bitmasks = {});
  int mask_words() const { return mask_words_; }
  // Rebuilds penalty slot `slot` from a request's prompt and output tokens (outside capture).
  void reset_slot(int slot, std::span<const int32_t> prompt, std::span<const int32_t> output);
  // Samples rows [0, n) of logits (f32 [>= n, vocab], a persistent buffer) with the staged rows.
  void sample(const Tensor& logits, int n);
  // Waits for the stream, then returns the results of the first `n` staged rows: the sampled
  // token, and with num_logprobs >= 0 its logprob (or the target token's) and top ones.
  std::vector<TokenLogprob> fetch(int n);

  // Device memory of the penalty state (reported at start-up).
  size_t state_bytes() const;
  // Bytes fetch() has copied device-to-host so far.
  uint64_t fetched_bytes() const { return fetched_bytes_; }

 private:
  Backend& backend_;
  std::unique_ptr<SamplingKernels> kernels_;
  SamplerLimits limits_;
  int mask_words_ = 0;
  std::vector<SamplingRow> staged_;  // host copy of the rows last staged
  uint64_t fetched_bytes_ = 0;
  Tensor rows_, adjustments_, counts_, prompt_mask_, slot_tokens_, bitmask_;
  Tensor sampled_, logprob_, top_ids_, top_lps_;
};

}  // namespace gs
