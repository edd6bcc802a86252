// AttentionBackend: paged attention with its KV-cache write, and the graph support it declares.
#pragma once
#include <memory>
#include <string>

#include "attention/attention_metadata.h"
#include "attention/cascade.h"
#include "attention/cg_support.h"
#include "attention/kv_cache.h"
#include "ops/backend.h"

namespace gs {

struct AttentionShape {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  float scale = 0.0f;    // softmax scale, usually 1/sqrt(head_dim)
  float softcap = 0.0f;  // > 0: scores are soft-capped, softcap * tanh(score / softcap) (Gemma 2)
  bool sinks = false;    // the layers attend with sinks (forward_with_sinks, gpt-oss): they never cascade
};

// The shape of a FULL graph's batch, from which a backend plans the launches the graph records.
struct AttentionGraphShape {
  int num_tokens = 0;         // the graph's padded token count
  int request_rows = 0;       // request rows the graph covers (real requests plus empty padding rows)
  int uniform_query_len = 0;  // > 0: every request has exactly this many queries; 0: a mixed batch
};

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;
  virtual std::string name() const = 0;
  virtual AttentionCGSupport cudagraph_support() const = 0;
  // Whether forward() honours md.cascade_prefix_len (attention/cascade.h); backends that do not
  // get 0 there and attend to each request's whole context.
  virtual bool supports_cascade() const { return false; }
  // Sets up what cascade batches need (a workspace), before any graph capture; the runner calls it
  // only when it will dispatch them (not under --disable-cascade-attn). Until then forward()
  // attends without cascading.
  virtual void prepare_cascade() {}
  // When a batch cascades on this backend (use_cascade_attention): its device's parallel units and
  // the most tokens its cascade launches take.
  virtual CascadeHeuristic cascade_heuristic() const { return {}; }

  // Launch planning: fills the host fields of `md` that kernels size their grids and choose their paths by
  // (num_reqs_padded, max_query_len). md.num_reqs must be set first. (SGLang's
  // init_forward_metadata_capture_cuda_graph / init_forward_metadata_replay_cuda_graph.)
  //
  // A FULL graph is planned from its shape alone, identically at capture and at every replay, so each replay
  // launches the kernels its capture recorded whatever batch it carries. The default covers every request row
  // and expects queries as long as the shape allows: uniform_query_len, or num_tokens for a mixed batch.
  virtual void plan_graph(AttentionMetadata& md, const AttentionGraphShape& shape) const;
  // An eager or piecewise step is planned from its own batch: its requests and its longest query.
  virtual void plan_eager(AttentionMetadata& md, int max_query_len) const;

  // Writes k, v of every token t < num_actual_tokens into the cache at slot_mapping[t], then
  // computes causal attention of each request's new queries over its whole context
  // (seq_lens[r] tokens, the last query_len of them new). Enqueued on backend.stream().
  // With window > 0 (sliding-window layers), a query at position p attends only to positions
  // (p - window, p], as HF's sliding-window mask; the window is a launch argument, fixed per
  // layer, so captured graphs stay valid.
  //   q [T, Hq * D], k, v [T, Hkv * D], out [T, Hq * D]
  virtual void forward(const Tensor& q, const Tensor& k, const Tensor& v, const KVCacheLayer& cache,
                       const AttentionMetadata& md, const Tensor& out, int window = -1) = 0;

  // Attention sinks (gpt-oss): sinks [Hq] f32 holds one learned logit per query head that joins
  // every query's softmax denominator and nothing else (HF appends it as an extra column, takes
  // the softmax, drops it): out = sum_j e^{s_j} v_j / (sum_j e^{s_j} + e^{sink_h}).
  // supports_sinks() says whether forward_with_sinks computes it; the default refuses.
  virtual bool supports_sinks() const { return false; }
  virtual void forward_with_sinks(const Tensor& q, const Tensor& k, const Tensor& v, const KVCacheLayer& cache,
                                  const AttentionMetadata& md, const Tensor& out, int window, const Tensor& sinks);
};

// The CPU reference backend. `declared` overrides the support it reports (tests use it to
// exercise mode downgrades); by default it reports ALWAYS, which is true of it.
std::unique_ptr<AttentionBackend> make_cpu_attention(Backend& backend, const AttentionShape& shape,
                                                     AttentionCGSupport declared = AttentionCGSupport::ALWAYS);

}  // namespace gs
