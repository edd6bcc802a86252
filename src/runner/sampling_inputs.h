// SamplingInputs: one step's sampling rows and logit adjustments for the device sampler, built
// from the scheduled requests, and the penalty slots that hold per-request token counts on the
// device across steps.
//
// A request with a repetition, presence or frequency penalty owns a penalty slot while it is
// being sampled; a slot is rebuilt from the request's tokens only when the request gets it
// (first sampled, or back after its slot was lent to another request), and the device keeps
// it current with every token it samples. Slots are lent least recently used first, never to
// two requests of one step.
#pragma once
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "sampling/sampler.h"
#include "types/scheduler_output.h"

namespace gs {

class SamplingInputs {
 public:
  explicit SamplingInputs(int num_slots);

  // A slot the device must rebuild from this request's tokens before sampling.
  struct SlotReset {
    int slot;
    const ScheduledRequest* request;
  };

  // Rows for `reqs` in order, then inert (greedy, nothing else) rows up to `num_rows`. Row i
  // samples output index num_output_tokens + step_offsets[i] of its request (offsets empty: all 0;
  // a verification step has rows 0..k of one request). Requests with penalties take offset 0 only
  // (their device counts would take the rejected tokens).
  void build(std::span<const ScheduledRequest* const> reqs, int num_rows, std::span<const int32_t> step_offsets = {});
  // build(), then the new slots rebuilt and the rows staged in `sampler` (outside capture).
  void stage(Sampler& sampler, std::span<const ScheduledRequest* const> reqs, int num_rows,
             std::span<const int32_t> step_offsets = {});

  const std::vector<SamplingRow>& rows() const { return rows_; }
  const std::vector<LogitAdjustment>& adjustments() const { return adjustments_; }
  const std::vector<SlotReset>& resets() const { return resets_; }

 private:
  struct Slot {
    int index;
    bool fresh;  // just lent to this request: to be rebuilt
  };
  SamplingRow row_for(const ScheduledRequest& r, int step_offset);
  Slot slot_for(RequestId id);

  std::vector<SamplingRow> rows_;
  std::vector<LogitAdjustment> adjustments_;
  std::vector<const std::vector<uint32_t>*> bitmask_sources_;  // by bitmask_row
  std::vector<uint32_t> bitmasks_;                             // staged words
  std::vector<SlotReset> resets_;
  std::vector<RequestId> slot_owner_;     // 0: free
  std::vector<uint64_t> slot_last_step_;  // step that last used the slot
  std::unordered_map<RequestId, int> slot_of_;
  uint64_t step_ = 0;
};

// Whether a request's sampling needs a penalty slot.
bool needs_penalty_slot(const SamplingParams& p);

}  // namespace gs
