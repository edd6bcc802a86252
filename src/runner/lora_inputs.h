// LoraInputs: the runner's side of multi-LoRA serving. Holds the adapters it is given in host
// memory (at start-up the first --max-cpu-loras of --lora-modules, each of which is read and
// checked; then those the engine adds and removes, which keeps the host cache's LRU policy), the
// device slots (--max-loras, LRU over adapters), and the persistent per-token slot buffer that the
// LoRA kernel reads (-1: the base model). Adapters are known by id: 1 + their index in
// --lora-modules for those, then whatever ids the engine gives run-time adapters.
#pragma once
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/lora_adapter.h"
#include "model/lora_slots.h"
#include "runner/runner_config.h"
#include "types/scheduler_output.h"

namespace gs {

class LoraInputs {
 public:
  // `mcfg`: the whole model, which adapters are checked against; `tp`: this rank's shard, which
  // the slots hold and each adapter is cut to (shard_lora_adapter).
  LoraInputs(const RunnerConfig& cfg, const ModelConfig& mcfg, const TpLayout& tp, Backend& backend,
             int max_num_tokens);
  ~LoraInputs();  // logs the slot loads (host -> device swaps) and their mean time

  LoraSlots& slots() { return *slots_; }
  // The persistent i32 [max_num_tokens] buffer of per-token slots (graphs bake its address).
  const Tensor& token_slots() const { return token_slots_; }
  static bool any_adapter(const SchedulerOutput& batch);

  // Reads and checks the PEFT directory `path`, keeps this rank's shard of it and lays that out
  // as a slot image. Touches host
  // memory and immutable state only: safe on any thread while steps run. Throws gs::Error
  // naming the file and field at fault.
  std::shared_ptr<const LoraSlotImage> read(const std::string& name, const std::string& path) const;
  // Between steps: serves `image` as adapter `lora_id` (throws for an id in use) / drops adapter
  // `lora_id` and frees its slot (throws for an unknown id). No device memory is allocated or freed: the graphs stay
  // valid.
  void add(int lora_id, std::shared_ptr<const LoraSlotImage> image);
  void remove(int lora_id);

  // Puts every adapter of the batch into a device slot (evicting the least recently used ones
  // the batch does not need), then writes each token's slot into token_slots for num_tokens
  // rows (padding: -1). The scheduler keeps a batch within --max-loras adapters.
  void stage(const SchedulerOutput& batch, int num_tokens);
  double read_seconds() const { return load_seconds_; }  // reading and preparing the adapters at start-up

 private:
  int slot_for(int lora_id, const std::vector<int>& needed);

  ModelConfig mcfg_;
  TpLayout tp_;
  int max_rank_ = 0;
  Backend& be_;
  std::unique_ptr<LoraSlots> slots_;
  std::map<int, std::shared_ptr<const LoraSlotImage>> images_;  // by lora_id: the adapters in host memory
  std::vector<int> slot_owner_;                                 // lora_id held by each slot, 0: empty
  std::vector<uint64_t> slot_used_;                             // last step that used each slot (LRU)
  uint64_t step_ = 0;
  Tensor token_slots_;
  std::vector<int32_t> host_slots_;
  double load_seconds_ = 0.0;
  int num_slot_loads_ = 0;
  double slot_load_seconds_ = 0.0;
};

}  // namespace gs
