// Implements runner/sampling_inputs.h (SamplingInputs).
#include "runner/sampling_inputs.h"

#include <algorithm>
#include <limits>
#include <map>

#include "core/error.h"

namespace gs {

bool needs_penalty_slot(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
}

SamplingInputs::SamplingInputs(int num_slots) : slot_owner_(num_slots, 0), slot_last_step_(num_slots, 0) {
  GS_CHECK(num_slots >= 1, "SamplingInputs needs at least one penalty slot");
}

SamplingInputs::Slot SamplingInputs::slot_for(RequestId id) {
  if (auto it = slot_of_.find(id); it != slot_of_.end()) {
    slot_last_step_[it->second] = step_;
    return {it->second, false};
  }
  const int n = int(slot_owner_.size());
  int best = -1;
  for (int s = 0; s < n && best < 0; ++s)
    if (slot_owner_[s] == 0) best = s;
  if (best < 0)  // none free: the least recently used one that this step has not used
    for (int s = 0; s < n; ++s)
      if (slot_last_step_[s] != step_ && (best < 0 || slot_last_step_[s] < slot_last_step_[best])) best = s;
  GS_CHECK(best >= 0, "no free penalty slot: more penalised requests in one step than max_num_seqs (internal error)");
  if (slot_owner_[best] != 0) slot_of_.erase(slot_owner_[best]);
  slot_owner_[best] = id;
  slot_last_step_[best] = step_;
  slot_of_[id] = best;
  return {best, true};
}

SamplingRow SamplingInputs::row_for(const ScheduledRequest& r, int step_offset) {
  const SamplingParams& p = *r.params;
  const int step = r.num_output_tokens + step_offset;
  SamplingRow row;
  row.temperature = p.temperature;
  row.top_k = p.top_k;
  row.top_p = p.top_p;
  row.min_p = p.min_p;
  row.seed_lo = static_cast<uint32_t>(r.seed);
  row.seed_hi = static_cast<uint32_t>(r.seed >> 32);
  row.step = step;
  row.repetition_penalty = p.repetition_penalty;
  row.presence_penalty = p.presence_penalty;
  row.frequency_penalty = p.frequency_penalty;
  row.num_logprobs = p.logprobs;
  if (needs_penalty_slot(p)) {
    GS_CHECK(step_offset == 0, "request {}: penalties cannot sample proposed positions (internal error)", r.id);
    const Slot slot = slot_for(r.id);
    if (slot.fresh) resets_.push_back({slot.index, &r});
    row.penalty_slot = slot.index;
  }
  // logit_bias, then the min_tokens mask of stop tokens: one entry per token.
  std::map<int32_t, float> adj;
  for (const auto& [token, bias] : p.logit_bias) adj[token] += bias;
  if (step < p.min_tokens)
    for (int t : p.stop_token_ids) adj[t] = -std::numeric_limits<float>::infinity();
  GS_CHECK(adj.size() <= size_t(kMaxAdjustmentsPerRow), "request {}: {} logit adjustments, at most {}", r.id,
           adj.size(), kMaxAdjustmentsPerRow);
  row.adjust_begin = static_cast<int32_t>(adjustments_.size());
  for (const auto& [token, value] : adj) adjustments_.push_back({token, value});
  row.adjust_end = static_cast<int32_t>(adjustments_.size());
  if (r.bitmask) {
    GS_CHECK(step_offset == 0, "request {}: a structured-output row cannot sample proposed positions (internal error)",
             r.id);
    row.bitmask_row = static_cast<int32_t>(bitmask_sources_.size());
    bitmask_sources_.push_back(r.bitmask);
  }
  return row;
}

void SamplingInputs::build(std::span<const ScheduledRequest* const> reqs, int num_rows,
                           std::span<const int32_t> step_offsets) {
  GS_CHECK(num_rows >= int(reqs.size()), "sampling rows: {} requests do not fit {} rows", reqs.size(), num_rows);
  GS_CHECK(step_offsets.empty() || step_offsets.size() == reqs.size(), "sampling rows: {} offsets for {} rows",
           step_offsets.size(), reqs.size());
  ++step_;
  rows_.clear();
  adjustments_.clear();
  resets_.clear();
  bitmask_sources_.clear();
  for (size_t i = 0; i < reqs.size(); ++i)
    rows_.push_back(row_for(*reqs[i], step_offsets.empty() ? 0 : step_offsets[i]));
  rows_.resize(size_t(num_rows), SamplingRow{});
}

void SamplingInputs::stage(Sampler& sampler, std::span<const ScheduledRequest* const> reqs, int num_rows,
                           std::span<const int32_t> step_offsets) {
  build(reqs, num_rows, step_offsets);
  for (const SlotReset& r : resets_) {
    const std::span<const int32_t> tokens(*r.request->all_token_ids);
    const size_t np = size_t(r.request->num_prompt_tokens);
    sampler.reset_slot(r.slot, tokens.first(np), tokens.subspan(np, size_t(r.request->num_output_tokens)));
  }
  bitmasks_.clear();
  for (const auto* m : bitmask_sources_) {
    GS_CHECK(m->size() == size_t(sampler.mask_words()),
             "structured output: a bitmask of {} words, the sampler takes {}", m->size(), sampler.mask_words());
    bitmasks_.insert(bitmasks_.end(), m->begin(), m->end());
  }
  sampler.stage(rows_, adjustments_, bitmasks_);
}

}  // namespace gs
