// AttentionBackend's default launch planning (attention_backend.h).
#include "attention/attention_backend.h"

#include "core/error.h"

namespace gs {

void AttentionBackend::plan_graph(AttentionMetadata& md, const AttentionGraphShape& shape) const {
  GS_CHECK(shape.request_rows >= md.num_reqs && shape.num_tokens >= 1,
           "attention: a graph of {} tokens and {} request rows cannot carry {} requests", shape.num_tokens,
           shape.request_rows, md.num_reqs);
  md.num_reqs_padded = shape.request_rows;
  md.max_query_len = shape.uniform_query_len > 0 ? shape.uniform_query_len : shape.num_tokens;
}

void AttentionBackend::plan_eager(AttentionMetadata& md, int max_query_len) const {
  md.num_reqs_padded = md.num_reqs;
  md.max_query_len = max_query_len;
}

void AttentionBackend::forward_with_sinks(const Tensor& q, const Tensor& k, const Tensor& v, const KVCacheLayer& cache,
                                          const AttentionMetadata& md, const Tensor& out, int window,
                                          const Tensor& sinks) {
  if (!sinks.defined()) return forward(q, k, v, cache, md, out, window);
  fail("attention backend '{}' does not support attention sinks (gpt-oss); use the CPU or CUDA backend", name());
}

}  // namespace gs
