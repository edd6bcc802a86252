// Implements runner/host_batch.h (HostBatch).
#include "runner/host_batch.h"

#include <algorithm>

#include "core/error.h"

namespace gs {

namespace {

void check_request(const ScheduledRequest& r, const HostBatchLimits& lim) {
  GS_CHECK(r.all_token_ids != nullptr && r.block_ids != nullptr, "request {}: token ids and block ids must be set",
           r.id);
  GS_CHECK(r.num_new_tokens >= 1, "request {}: num_new_tokens must be >= 1, got {}", r.id, r.num_new_tokens);
  const long long end = static_cast<long long>(r.num_computed_tokens) + r.num_new_tokens;
  const size_t proposed = r.spec_token_ids ? r.spec_token_ids->size() : 0;
  GS_CHECK(r.num_computed_tokens >= 0 && end <= static_cast<long long>(r.all_token_ids->size() + proposed),
           "request {}: tokens [{}, {}) are outside its {} known and {} proposed tokens", r.id, r.num_computed_tokens,
           end, r.all_token_ids->size(), proposed);
  GS_CHECK(r.num_spec_tokens() == 0 || (r.sample && r.num_computed_tokens + 1 == int(r.all_token_ids->size())),
           "request {}: proposed tokens are verified only in decode (after every known token)", r.id);
  GS_CHECK(end <= lim.max_model_len, "request {}: {} tokens exceed max_model_len = {}", r.id, end, lim.max_model_len);
  const long long blocks_needed = (end + lim.block_size - 1) / lim.block_size;
  GS_CHECK(static_cast<long long>(r.block_ids->size()) >= blocks_needed,
           "request {}: {} tokens need {} KV blocks but its block table has {}", r.id, end, blocks_needed,
           r.block_ids->size());
  // Leading entries may be -1: blocks given back because they lie wholly outside every layer's
  // sliding window (attention never reads them); the blocks receiving new tokens must be real.
  const long long first_new = r.num_computed_tokens / lim.block_size;
  for (long long b = 0; b < blocks_needed; ++b) {
    const int32_t id = (*r.block_ids)[b];
    GS_CHECK((id >= 0 || (id == -1 && b < first_new)) && id < lim.num_blocks,
             "request {}: block {} of its table is {} (the cache has {} blocks)", r.id, b, id, lim.num_blocks);
  }
  GS_CHECK(!r.sample || r.params != nullptr, "request {}: sampling parameters are missing", r.id);
}

}  // namespace

HostBatch build_host_batch(const SchedulerOutput& batch, const HostBatchLimits& lim) {
  HostBatch hb;
  hb.num_reqs = static_cast<int>(batch.requests.size());
  GS_CHECK(hb.num_reqs <= lim.max_num_reqs, "a batch of {} requests exceeds max_num_seqs = {}", hb.num_reqs,
           lim.max_num_reqs);
  const int total = batch.total_tokens();
  GS_CHECK(total <= lim.max_num_tokens, "a batch of {} tokens exceeds max_num_batched_tokens = {}", total,
           lim.max_num_tokens);
  hb.input_ids.reserve(total);
  hb.positions.reserve(total);
  hb.slot_mapping.reserve(total);
  hb.query_start_loc.push_back(0);
  for (const ScheduledRequest& r : batch.requests) {
    check_request(r, lim);
    const int end = r.num_computed_tokens + r.num_new_tokens;
    hb.block_table_width = std::max(hb.block_table_width, (end + lim.block_size - 1) / lim.block_size);
  }
  const size_t width = size_t(hb.block_table_width);
  hb.block_table.assign(size_t(hb.num_reqs) * width, 0);

  for (int ri = 0; ri < hb.num_reqs; ++ri) {
    const ScheduledRequest& r = batch.requests[ri];
    const auto& blocks = *r.block_ids;
    const int end = r.num_computed_tokens + r.num_new_tokens;
    for (int pos = r.num_computed_tokens; pos < end; ++pos) {
      hb.input_ids.push_back(r.token_at(pos));
      hb.positions.push_back(pos);
      hb.slot_mapping.push_back(blocks[pos / lim.block_size] * lim.block_size + pos % lim.block_size);
    }
    std::copy_n(blocks.begin(), std::min(blocks.size(), width), hb.block_table.begin() + size_t(ri) * width);
    hb.query_start_loc.push_back(static_cast<int32_t>(hb.input_ids.size()));
    hb.seq_lens.push_back(end);
    hb.max_query_len = std::max(hb.max_query_len, r.num_new_tokens);
    hb.max_seq_len = std::max(hb.max_seq_len, end);
    if (r.sample) {  // the last token, or the last 1 + k of a verification
      const int rows = 1 + r.num_spec_tokens();
      for (int j = 0; j < rows; ++j) {
        hb.logits_rows.push_back(static_cast<int32_t>(hb.input_ids.size()) - rows + j);
        hb.sampled.push_back(&r);
        hb.sample_offsets.push_back(j);
      }
    }
  }
  hb.num_actual_tokens = static_cast<int>(hb.input_ids.size());
  return hb;
}

void pad_host_batch(HostBatch& hb, int num_tokens, int num_req_rows) {
  GS_CHECK(num_tokens >= hb.num_actual_tokens && num_req_rows >= hb.num_reqs,
           "cannot pad a batch of {} tokens, {} requests to {} tokens, {} requests", hb.num_actual_tokens, hb.num_reqs,
           num_tokens, num_req_rows);
  hb.input_ids.resize(num_tokens, 0);
  hb.positions.resize(num_tokens, 0);
  hb.slot_mapping.resize(num_tokens, -1);
  hb.query_start_loc.resize(num_req_rows + 1, hb.num_actual_tokens);
  hb.seq_lens.resize(num_req_rows, 0);
}

}  // namespace gs
