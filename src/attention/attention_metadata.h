// AttentionMetadata: where each token of a batch reads and writes the paged KV cache.
//
// The tensors are persistent buffers (allocated once for the largest batch, on the backend's
// device) so a captured graph reads whatever the runner wrote into them before replay. Kernels
// must take every per-batch value from these buffers, never from the host fields, when running
// inside a graph; the host fields exist for eager launches and for sizing grids of a padded shape.
//
// Padding: requests r >= num_reqs have query_start_loc[r] = query_start_loc[num_reqs] and
// seq_lens[r] = 0 (they attend to nothing); tokens t >= num_actual_tokens have slot -1 (write
// no KV). Attention output rows of padded tokens are written with zeros.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace gs {

struct AttentionMetadata {
  Tensor query_start_loc;  // i32 [max_reqs + 1]: first token of request r; [num_reqs] = num_actual_tokens
  Tensor seq_lens;         // i32 [max_reqs]: tokens in context after this step (cached + new)
  Tensor block_table;      // i32 [max_reqs, max_blocks_per_req]: KV block ids of each request
  Tensor slot_mapping;     // i32 [max_tokens]: block * block_size + offset where token t's K/V go; -1 = none

  // Host-side description of the current step (AttentionBackend::plan_graph / plan_eager fill the last two).
  int block_size = 16;
  int max_blocks_per_req = 0;
  int num_reqs = 0;         // real requests
  int num_reqs_padded = 0;  // request rows kernels must cover: >= num_reqs
  int max_query_len = 0;    // the longest query kernels must expect (a graph's: the longest its shape allows)
  // Cascade attention (attention/cascade.h): > 0 when every request's first cascade_prefix_len
  // context tokens lie in the same blocks (the first cascade_prefix_len / block_size columns of
  // every block-table row) before all its queries. Set only for eager attention (NONE and
  // PIECEWISE steps), never for a FULL graph, and only for backends that supports_cascade().
  int cascade_prefix_len = 0;
  // Eager steps only (NONE and PIECEWISE; empty for a FULL graph, whose launches must not depend
  // on the batch): the host's query_start_loc [num_reqs + 1] and seq_lens [num_reqs], for work a
  // backend sizes by the batch's contexts (MLA's expanded form).
  std::vector<int32_t> host_query_start_loc, host_seq_lens;
};

}  // namespace gs
