// Executor: what the engine needs from whatever runs the model (the ModelRunner, or a fake in
// tests): run one scheduled batch and sample, and describe the KV cache it holds.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "executor/engine_config.h"
#include "model/model_config.h"
#include "runner/model_runner.h"
#include "types/scheduler_output.h"

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
  // remove_lora between steps. An executor without LoRA refuses them. The worker processes'
  // executor checks the adapter in read_lora and hands back an image holding only its name and
  // path: add_lora has every rank read it and lay out its own shard (errors come back from there
  // too, and leave no rank holding it).
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
// One worker process per rank (tensor parallelism, or --distributed-executor-backend mp), this
// process the driver (multiproc_executor.cpp).
std::unique_ptr<Executor> make_multiproc_executor(const EngineConfig& cfg);
// Whether cfg runs the model in worker processes (--distributed-executor-backend mp, the default
// for more than one rank) rather than in this process (uni); refuses a backend that cannot run cfg.
inline bool uses_worker_processes(const EngineConfig& cfg) {
  const std::string& b = cfg.distributed_executor_backend;
  GS_CHECK(b.empty() || b == "uni" || b == "mp", "--distributed-executor-backend must be uni or mp, got '{}'", b);
  GS_CHECK(b != "uni" || cfg.tensor_parallel_size == 1,
           "--distributed-executor-backend uni runs the model in this process on one GPU; --tensor-parallel-size {} "
           "needs mp (one worker process per GPU)",
           cfg.tensor_parallel_size);
  return b == "mp" || cfg.tensor_parallel_size > 1;
}
// The executor cfg asks for: the in-process runner, or the worker processes.
inline std::unique_ptr<Executor> make_executor(const EngineConfig& cfg) {
  return uses_worker_processes(cfg) ? make_multiproc_executor(cfg) : make_runner_executor(cfg);
}

}  // namespace gs
