// The CUDA paged-attention backend (q/k/v and KV cache in the backend's compute dtype, bf16 or f32).
//
// It declares AttentionCGSupport::ALWAYS, which is true of it: its kernels read every per-batch
// value (query_start_loc, seq_lens, block_table, slot_mapping) from the metadata's device
// buffers and size their grids from the padded shape alone (q rows, num_reqs_padded), so one
// captured graph replays correctly for any batch — prefill, decode or mixed — of that shape.
// A graph must be replayed only for batches with num_reqs <= the num_reqs_padded it was
// captured with.
#pragma once
#include <memory>

#include "attention/attention_backend.h"
#include "ops/kernel_options.h"

namespace gs {

// `backend` must be the CUDA backend (its stream is used). Throws gs::Error for head dims over
// 256 or head counts that are not a GQA grouping. Each launch runs the kernel that
// select_attention_kernel (attention/attention_kernel_selection.h) picks under `options`.
std::unique_ptr<AttentionBackend> make_cuda_attention(Backend& backend, const AttentionShape& shape,
                                                      const AttentionKernelOptions& options = {});

}  // namespace gs
