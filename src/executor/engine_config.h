// EngineConfig: everything needed to build an engine: the runner's config (model, memory plan,
// batching, graphs) and what the engine itself reads (tokenizer, names, prefix caching, sampling
// defaults). validate() checks the runner's part; the engine's is checked where it is used.
#pragma once
#include <string>

#include "runner/runner_config.h"

namespace gs {

struct EngineConfig : RunnerConfig {
  std::string tokenizer;             // tokenizer directory (default: the model's)
  bool skip_tokenizer_init = false;  // a model without tokenizer.json: byte-level (token-id prompts)
  std::string served_model_name;     // name clients use (default: model dir name or preset)
  // Default sampling parameters: "auto" (the model's generation_config.json), "vllm" (none) or
  // a directory with a generation_config.json.
  std::string generation_config = "auto";
  bool enable_prefix_caching = true;  // reuse the KV blocks of prompts' common prefixes (vLLM's default)
  // What the model serves (vLLM's --runner): "generate" (text), or "pooling" (embeddings of
  // prompts, /v1/embeddings); pooling_type "last" | "mean" overrides the model's pooling config.
  std::string runner = "generate";
  std::string pooling_type;

  // Tensor parallelism across hosts (vLLM / torchrun's flags): the workers of every node connect
  // to the driver at master_addr:master_port (0 with one node: any free port on 127.0.0.1).
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  // A worker that does not answer a step within this many seconds is taken as hung.
  double worker_timeout_s = 300.0;
  // Where the model runs (vLLM's --distributed-executor-backend): "uni" in this process (one GPU),
  // "mp" in one worker process per rank; "" picks uni for one rank and mp for more.
  std::string distributed_executor_backend;
};

}  // namespace gs
