// RunnerConfig: what the model runner is built from (model, device, memory plan, batching
// limits, graphs, LoRA slots). The engine's config extends it with what only the engine reads.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cudagraph/compilation_config.h"
#include "ops/kernel_options.h"
#include "spec/speculative_config.h"

namespace gs {

struct RunnerConfig {
  std::string model;                    // HF model directory; empty: the dummy preset below
  std::string load_format = "auto";     // auto | safetensors | dummy
  std::string preset = "smollm2-135m";  // shape for --load-format dummy (graphserve info --presets)
  std::string device = "auto";          // auto (cuda if present) | cpu | cuda
  std::string dtype = "auto";           // auto | float32 | bfloat16 | float16
  uint64_t seed = 0;                    // dummy weights and unseeded sampling
  // --quantization: empty (the checkpoint's own, from config.json) or fp8 (model/quant_config.h).
  std::string quantization;
  std::string kv_cache_dtype = "auto";  // auto (the compute dtype) | fp8 | fp8_e4m3 (attention/kv_cache.h)
  bool fp8_kv_cache() const { return kv_cache_dtype == "fp8" || kv_cache_dtype == "fp8_e4m3"; }

  int max_num_seqs = 256;
  int max_num_batched_tokens = 2048;
  int max_model_len = 0;  // 0: the model's max_position_embeddings
  int block_size = 16;
  float gpu_memory_utilization = 0.9f;
  size_t kv_cache_memory_bytes = 0;  // 0: from gpu_memory_utilization (CUDA) or 512 MiB (CPU)
  int tensor_parallel_size = 1;
  // --enable-expert-parallel: the ranks hold whole routed experts instead of every expert's share
  // of its width (model/tp_layout.h); no effect at tensor_parallel_size 1 or without experts.
  bool enable_expert_parallel = false;
  // This process's tensor-parallel rank and the group it joins: a shared-memory group name (CPU)
  // or an NCCL unique id in hex (CUDA). Set by the worker processes (executor/multiproc_executor),
  // never by users; empty when tensor_parallel_size is 1.
  int tp_rank = 0;
  std::string tp_group;
  // --disable-custom-all-reduce: NCCL for every all-reduce size (the driver also sets it when the
  // ranks span several hosts).
  bool disable_custom_all_reduce = false;
  // Which kernel variants the CUDA backend, attention and all-reduce run (the defaults in production;
  // tests and benchmarks set fields to compare variants).
  KernelOptions kernel_options;
  // FULL_AND_PIECEWISE captures piecewise graphs on a sparse ladder of sizes (docs/CUDA_GRAPHS.md
  // §8); true: on every capture size, as vLLM does.
  bool piecewise_every_capture_size = false;

  // Multi-LoRA serving (vLLM's flags): PEFT adapters checked at start-up, selected per request
  // by name; at most max_loras distinct adapters per batch (device slots). max_cpu_loras is the
  // capacity of the LRU cache of adapters in host memory: the runner holds the first ones of
  // lora_modules, and the engine reads the others from their directory when a request names them.
  bool enable_lora = false;
  std::vector<std::pair<std::string, std::string>> lora_modules;  // (name, PEFT directory)
  int max_loras = 1;
  int max_lora_rank = 16;
  int max_cpu_loras = 0;  // 0: max_loras
  int lora_host_capacity() const { return max_cpu_loras > 0 ? max_cpu_loras : max_loras; }

  bool enforce_eager = false;  // same as cudagraph_mode NONE
  // --disable-cascade-attn (vLLM's): never run a batch's shared prefix as one attention part
  // (attention/cascade.h); by default batches that pay off do.
  bool disable_cascade_attn = false;
  CompilationConfig compilation;
  // Speculative decoding (--speculative-config): verification steps of 1 + k tokens per request.
  SpeculativeConfig speculative;

  // Throws gs::Error naming the first invalid field and its valid range.
  void validate() const;
};

}  // namespace gs
