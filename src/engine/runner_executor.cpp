#include "engine/executor.h"
#include "runner/model_runner.h"

namespace gs {
namespace {

class RunnerExecutor final : public Executor {
 public:
  explicit RunnerExecutor(const EngineConfig& cfg) : runner_(cfg) {}
  RunnerOutput execute(const SchedulerOutput& batch) override { return runner_.execute(batch); }
  const ModelConfig& model_config() const override { return runner_.model_config(); }
  int num_kv_blocks() const override { return runner_.num_kv_blocks(); }
  int block_size() const override { return runner_.block_size(); }
  int max_model_len() const override { return runner_.max_model_len(); }
  RunnerStats stats() const override { return runner_.stats(); }
  std::string device_name() const override { return runner_.device_name(); }

 private:
  ModelRunner runner_;
};

}  // namespace

std::unique_ptr<Executor> make_runner_executor(const EngineConfig& cfg) {
  return std::make_unique<RunnerExecutor>(cfg);
}

}  // namespace gs
