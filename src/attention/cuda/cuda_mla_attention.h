// The CUDA multi-head latent attention backend (attention/mla_attention.h) on the kernels of
// attention/cuda/mla_kernels.h: the latent cache in the compute dtype or e4m3, requests in the
// absorbed form, attending on tensor cores in bf16 (where mla_attend_mma_supported holds the
// dims; f32 and other dims on the CUDA-core kernel). Those kernels read each batch from the
// metadata's device buffers, size their grids from the padded token count and use the model's
// fixed scratch (MlaForwardArgs::q_latent, o_latent) and the backend's own for the context splits
// of small batches (sized once, for cuda::kMlaSplitRows), so it declares ALWAYS: mixed batches
// replay FULL graphs too. In eager steps (the metadata's host_seq_lens set) the requests of many
// queries at the end of the batch run the expanded form (cuda::MlaExpandedLaunch) in bf16 at
// DeepSeek's head dims, over the backend's own scratch, sized for one request at max_context tokens
// within bounds (mla_expanded_scratch_rows; 0: the smallest).
#pragma once
#include <memory>

#include "attention/mla_attention.h"

namespace gs {

// `backend` must be the CUDA backend (its stream is used). Throws gs::Error naming the dims the
// kernels do not hold.
std::unique_ptr<MlaAttentionBackend> make_cuda_mla_attention(Backend& backend, const MlaShape& shape,
                                                             int max_context = 0);

}  // namespace gs
