// ModelRunner: runs scheduled batches through the model on one device, through CUDA graphs.
//
// Owns the backend, the model, the KV cache and the persistent input buffers. At construction
// it plans memory (weights, one activation arena for max_num_batched_tokens, KV cache from
// what is left), warms up and captures every graph of the resolved mode. execute() fills the
// persistent buffers, asks the dispatcher for a runtime mode, runs the forward and samples.
#pragma once
#include <memory>

#include "model/model_config.h"
#include "runner/runner_config.h"
#include "types/scheduler_output.h"

namespace gs {

struct LoraSlotImage;

struct RunnerStats {
  uint64_t steps_none = 0, steps_piecewise = 0, steps_full = 0;
  uint64_t steps_cascade = 0;                 // of those, steps with cascade attention (never FULL)
  uint64_t padded_tokens = 0;                 // tokens of padding computed (waste)
  uint64_t graph_captures_after_startup = 0;  // captures the graph layer refused while serving (stays 0)
  uint64_t d2h_bytes = 0;                     // device-to-host bytes of sampled results
  int num_graphs = 0;
  double capture_seconds = 0.0;
  double gemm_tuning_seconds = 0.0;  // start-up GEMM autotuning (cache read included)
  bool gemm_tuning_cache_hit = false;
  size_t graph_memory_bytes = 0;            // all graphs (and what their captures loaded)
  size_t graph_memory_piecewise_bytes = 0;  // of which the PIECEWISE graphs
  size_t graph_memory_full_bytes = 0;       // and the FULL graphs
  size_t graph_memory_reserved_bytes = 0;   // held back from the KV cache for them (the estimate)
  CUDAGraphMode resolved_mode = CUDAGraphMode::NONE;
};

class ModelRunner {
 public:
  explicit ModelRunner(const RunnerConfig& cfg);
  ~ModelRunner();

  RunnerOutput execute(const SchedulerOutput& batch);

  const ModelConfig& model_config() const;
  int num_kv_blocks() const;
  int block_size() const;
  int max_model_len() const;
  std::string device_name() const;  // "cpu", "cuda:0 (NVIDIA H200)"
  RunnerStats stats() const;
  // Run-time LoRA adapters (--enable-lora; see LoraInputs): read_lora reads and checks a PEFT
  // directory (any thread, while steps run); add_lora / remove_lora serve or drop it by id
  // between steps. Throw gs::Error (LoRA not enabled, a malformed adapter, --max-cpu-loras).
  std::shared_ptr<const LoraSlotImage> read_lora(const std::string& name, const std::string& path) const;
  void add_lora(int id, std::shared_ptr<const LoraSlotImage> image);
  void remove_lora(int id);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gs
