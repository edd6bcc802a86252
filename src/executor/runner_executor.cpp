// Implements executor/executor.h with the ModelRunner: the executor the engine uses on a real device.
#include "executor/executor.h"
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
  std::shared_ptr<const LoraSlotImage> read_lora(const std::string& name, const std::string& path) const override {
    return runner_.read_lora(name, path);
  }
  void add_lora(int id, std::shared_ptr<const LoraSlotImage> image) override { runner_.add_lora(id, std::move(image)); }
  void remove_lora(int id) override { runner_.remove_lora(id); }
  std::string device_name() const override { return runner_.device_name(); }

 private:
  ModelRunner runner_;
};

}  // namespace

std::unique_ptr<Executor> make_runner_executor(const EngineConfig& cfg) {
  return std::make_unique<RunnerExecutor>(cfg);
}

}  // namespace gs
