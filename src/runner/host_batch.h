// HostBatch: one step's inputs laid out on the host, ready to copy into the persistent buffers.
//
// Positions continue from each request's num_computed_tokens; token t of request r goes to KV
// slot block_ids[pos / block_size] * block_size + pos % block_size.
#pragma once
#include <cstdint>
#include <vector>

#include "types/scheduler_output.h"

namespace gs {

struct HostBatchLimits {
  int block_size = 16;
  int max_blocks_per_req = 0;
  int max_model_len = 0;
  int max_num_tokens = 0;  // max_num_batched_tokens
  int max_num_reqs = 0;    // max_num_seqs
  int num_blocks = 0;      // KV cache blocks (valid block ids are [0, num_blocks))
};

struct HostBatch {
  std::vector<int32_t> input_ids, positions, slot_mapping;  // [num_actual_tokens]
  std::vector<int32_t> query_start_loc;                     // [num_reqs + 1]
  std::vector<int32_t> seq_lens;                            // [num_reqs]
  // [num_reqs, block_table_width]: the blocks each request's tokens so far lie in (0-filled after
  // a request's own). Attention reads no further, so the device table's other columns may hold
  // anything; uploading these few columns instead of max_model_len / block_size of them each step
  // is what keeps a long-context model's large batches cheap on the host.
  std::vector<int32_t> block_table;
  int block_table_width = 0;  // max over requests of ceil(seq_len / block_size)
  // Rows to sample: the last token of each sampled request; with proposals, each of its 1 + k
  // tokens (sample_offsets 0..k: the output index it samples is num_output_tokens + offset).
  std::vector<int32_t> logits_rows;
  std::vector<const ScheduledRequest*> sampled;  // per row, in order (a verified request's rows are adjacent)
  std::vector<int32_t> sample_offsets;           // per row
  int num_actual_tokens = 0;
  int num_reqs = 0;
  int max_query_len = 0;
  int max_seq_len = 0;

  // vLLM's uniform decode: every request has exactly q new tokens (q = 1 without speculation).
  bool uniform_decode(int q) const { return num_reqs > 0 && max_query_len == q && num_actual_tokens == num_reqs * q; }
};

// Throws gs::Error naming the request and the field when the batch is inconsistent or too big.
HostBatch build_host_batch(const SchedulerOutput& batch, const HostBatchLimits& limits);

// Pads the token arrays to `num_tokens` (token 0 at position 0, slot -1: no KV written) and the
// request arrays to `num_req_rows` rows (empty requests: no queries, seq_len 0), the form a
// graph captured for a bigger batch expects. num_actual_tokens and num_reqs stay the real ones.
void pad_host_batch(HostBatch& hb, int num_tokens, int num_req_rows);

}  // namespace gs
