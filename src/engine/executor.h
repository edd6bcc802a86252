// Executor: what the engine needs from whatever runs the model (the ModelRunner, or a fake in
// tests): run one scheduled batch and sample, and describe the KV cache it holds.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/engine_config.h"
#include "model/model_config.h"
#include "runner/latency_bench.h"
#include "runner/model_runner.h"
#include "runner/scheduler_output.h"

namespace gs {

class Executor {
 public:
  virtual ~Executor() = default;
  // Computes the scheduled tokens and returns one sampled token per request with sample = true.
  virtual RunnerOutput execute(const SchedulerOutput& batch) = 0;
  virtual const ModelConfig& model_config() const = 0;
  virtual int num_kv_blocks() const = 0;
  virtual int block_size() const = 0;
  virtual int max_model_len() const = 0;
  virtual RunnerStats stats() const { return {}; }
  // Run-time LoRA adapters (see ModelRunner::read_lora): read_lora on any thread, add_lora /
  // remove_lora between steps. An executor without LoRA refuses them.
  virtual std::shared_ptr<const LoraSlotImage> read_lora(const std::string& name, const std::string& path) const {
    throw Error(
        fmt::format("cannot load LoRA adapter '{}' from {}: this executor serves no LoRA adapters", name, path));
  }
  virtual void add_lora(int id, std::shared_ptr<const LoraSlotImage>) {
    throw Error(fmt::format("this executor serves no LoRA adapters (id {})", id));
  }
  virtual void remove_lora(int id) { throw Error(fmt::format("this executor serves no LoRA adapters (id {})", id)); }
  virtual std::string device_name() const { return ""; }  // "cuda:0 (NVIDIA H200)", "2 x cuda:0 (...)"
  // Seconds each tensor-parallel rank's last step took (empty without tensor parallelism).
  virtual std::vector<double> rank_step_seconds() const { return {}; }
  // Why the executor cannot run any more steps (a worker died or hung), or "" while healthy.
  virtual std::string fatal_error() const { return ""; }
};

// The real one: a ModelRunner built from `cfg` (defined in runner_executor.cpp, so code that
// only uses fakes does not link the model).
std::unique_ptr<Executor> make_runner_executor(const EngineConfig& cfg);
// Tensor parallelism (cfg.tensor_parallel_size > 1): one worker process per rank, this process
// the driver (multiproc_executor.cpp).
std::unique_ptr<Executor> make_multiproc_executor(const EngineConfig& cfg);
// The executor as the latency benchmark drives it.
inline BenchModel bench_model(Executor& e) {
  return {[&e](const SchedulerOutput& so) { return e.execute(so); },
          [&e] { return e.stats(); },
          e.max_model_len(),
          e.block_size(),
          e.num_kv_blocks(),
          e.model_config().vocab_size};
}
// The executor cfg asks for: the in-process runner, or the worker processes.
inline std::unique_ptr<Executor> make_executor(const EngineConfig& cfg) {
  return cfg.tensor_parallel_size > 1 ? make_multiproc_executor(cfg) : make_runner_executor(cfg);
}

}  // namespace gs
