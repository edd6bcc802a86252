// ModelRunner::Impl: the runner's state, private to the model_runner*.cpp files: model_runner.cpp
// (execute: inputs, dispatch, forward, sampling), model_runner_setup.cpp (start-up: model, memory
// plan, buffers, modes), model_runner_capture.cpp (warm-up and graph capture) and
// model_runner_prompt_logprobs.cpp.
#pragma once
#include <memory>
#include <vector>

#include "attention/attention_backend.h"
#include "cudagraph/cudagraph_dispatcher.h"
#include "cudagraph/cudagraph_wrapper.h"
#include "cudagraph/graph_memory.h"
#include "model/model_factory.h"
#include "runner/host_batch.h"
#include "runner/lora_inputs.h"
#include "runner/model_runner.h"
#include "runner/sampling_inputs.h"
#include "sampling/sampler.h"

namespace gs {

// Device buffers that graphs read: written before every forward, never reallocated.
struct PersistentBuffers {
  Tensor input_ids, positions, slot_mapping;  // i32 [max_tokens]
  Tensor query_start_loc;                     // i32 [max_reqs + 1]
  Tensor seq_lens;                            // i32 [max_reqs]
  Tensor block_table;                         // i32 [max_reqs, max_blocks_per_req]
  Tensor logits_rows;                         // i32 [max_sample_rows]
  Tensor logits;                              // f32 [max_sample_rows, vocab]
};

struct ModelRunner::Impl {
  RunnerConfig cfg;
  ModelConfig mcfg;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Communicator> comm;  // tensor parallelism (tensor_parallel_size > 1)
  ModelConfig local_cfg;               // this rank's shapes (heads, KV heads): mcfg when unsharded
  std::unique_ptr<AttentionBackend> attention;
  std::unique_ptr<PiecewiseModel> model;
  std::vector<KVCacheLayer> kv;
  int num_blocks = 0;
  int max_model_len = 0;
  int max_tokens = 0;  // max_num_batched_tokens
  int max_reqs = 0;    // max_num_seqs
  int max_blocks_per_req = 0;
  int uniform_query_len = 1;  // 1 + num_speculative_tokens
  // Most rows one forward samples: max_num_seqs, or with speculation every token of a
  // verification batch (min(max_num_batched_tokens, max_num_seqs * (1 + k))).
  int max_sample_rows = 0;

  PersistentBuffers buf;
  AttentionMetadata md;
  ForwardInputs inputs;
  std::unique_ptr<LoraInputs> lora;  // with --enable-lora
  std::unique_ptr<Sampler> sampler;
  SamplingInputs sampling_inputs;
  // Rows the sampling tail (logits, then sampler) runs on in the next forward: the sampled
  // requests (eager and piecewise), or every request row of the FULL graph's shape.
  int tail_rows = 0;

  // Cascade attention may run (build_model): not --disable-cascade-attn, the backend supports it and
  // no layer has a sliding window (a window may end inside the shared prefix).
  bool cascade_enabled = false;

  CudagraphDispatcher dispatcher;
  GraphMemoryEstimate graph_reserve;  // held back from the KV cache for the graphs (resolve_mode_and_keys)
  std::vector<std::unique_ptr<CUDAGraphWrapper>> piece_graphs;  // PIECEWISE, one per piece
  std::unique_ptr<CUDAGraphWrapper> full_graph;                 // FULL, the whole forward
  std::vector<const void*> input_addresses;

  RunnerStats stats;
  bool serving = false;  // start-up captured every graph: no more captures

  explicit Impl(const RunnerConfig& c);
  ~Impl();

  // Setup (model_runner_setup.cpp).
  void build_model();
  void plan_kv_cache();
  void allocate_buffers();
  void resolve_mode_and_keys();  // before plan_kv_cache: it sets graph_reserve
  void build_wrappers();

  // Forward (model_runner.cpp).
  // Pads hb to the graph's shape and copies it into the persistent buffers. The copies read hb
  // before they return (CPU copies run at once; CUDA copies from pageable memory are staged), and
  // hb stays alive through the forward anyway.
  void stage(HostBatch& hb, int num_tokens, int sample_rows);
  void upload(const HostBatch& hb, int num_tokens);
  void stage_sampling(const HostBatch& hb, int rows);
  void run_tail();
  void plan_attention(const HostBatch& hb, CUDAGraphMode runtime, const BatchDescriptor& desc, int cascade_prefix = 0);
  int cascade_prefix(const HostBatch& hb, const BatchDescriptor& desc) const;
  RunnerOutput execute(const SchedulerOutput& batch);
  void forward(CUDAGraphMode runtime, const BatchDescriptor& desc);
  HostBatchLimits host_limits() const;
  int graph_tail_rows(const BatchDescriptor& d) const;
  RunnerOutput collect(const HostBatch& hb);
  // model_runner_prompt_logprobs.cpp
  std::vector<PromptLogprob> prompt_logprobs(const SchedulerOutput& batch, const HostBatch& hb);
  int refused_captures() const;
  size_t total_graphs() const;

  // Start-up graphs (model_runner_capture.cpp).
  HostBatch stage_dummy(const BatchDescriptor& key, int sample_rows);  // returns what it staged
  void eager_dummy_forward(int num_tokens);  // a mixed dummy batch, eagerly, sampling tail included
  void warm_up();
  void tune_gemms();  // after warm_up (it records the GEMM shapes), before capture_all
  void capture_all();
};

}  // namespace gs
