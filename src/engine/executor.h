// Executor: what the engine needs from whatever runs the model (the ModelRunner, or a fake in
// tests): run one scheduled batch and sample, and describe the KV cache it holds.
#pragma once
#include <memory>
#include <string>

#include "core/error.h"
#include "engine/engine_config.h"
#include "model/model_config.h"
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
};

// The real one: a ModelRunner built from `cfg` (defined in runner_executor.cpp, so code that
// only uses fakes does not link the model).
std::unique_ptr<Executor> make_runner_executor(const EngineConfig& cfg);

}  // namespace gs
