// Executor: what the engine needs from whatever runs the model (the ModelRunner, or a fake in
// tests): run one scheduled batch and sample, and describe the KV cache it holds.
#pragma once
#include <memory>

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
};

// The real one: a ModelRunner built from `cfg` (defined in runner_executor.cpp, so code that
// only uses fakes does not link the model).
std::unique_ptr<Executor> make_runner_executor(const EngineConfig& cfg);

}  // namespace gs
