// LoraInputs: the runner's side of multi-LoRA serving. Holds the adapters of --lora-modules in
// host memory (read at start-up), the device slots (--max-loras, LRU over adapters), and the
// persistent per-token slot buffer that the LoRA kernels read (-1: the base model).
#pragma once
#include <chrono>
#include <memory>
#include <vector>

#include "model/lora_adapter.h"
#include "model/lora_slots.h"
#include "runner/runner_config.h"
#include "runner/scheduler_output.h"

namespace gs {

class LoraInputs {
 public:
  LoraInputs(const RunnerConfig& cfg, const ModelConfig& mcfg, Backend& backend, int max_num_tokens);
  ~LoraInputs();  // logs the slot loads (host -> device swaps) and their mean time

  LoraSlots& slots() { return *slots_; }
  // The persistent i32 [max_num_tokens] buffer of per-token slots (graphs bake its address).
  const Tensor& token_slots() const { return token_slots_; }
  static bool any_adapter(const SchedulerOutput& batch);
  // Puts every adapter of the batch into a device slot (evicting the least recently used ones
  // the batch does not need), then writes each token's slot into token_slots for num_tokens
  // rows (padding: -1). The scheduler keeps a batch within --max-loras adapters.
  void stage(const SchedulerOutput& batch, int num_tokens);
  double read_seconds() const { return load_seconds_; }  // reading and preparing the adapters at start-up

 private:
  int slot_for(int lora_id, const std::vector<int>& needed);

  Backend& be_;
  std::vector<LoraSlotImage> images_;  // index = lora_id - 1: the adapters in host memory
  std::unique_ptr<LoraSlots> slots_;
  std::vector<int> slot_owner_;      // lora_id held by each slot, 0: empty
  std::vector<uint64_t> slot_used_;  // last step that used each slot (LRU)
  uint64_t step_ = 0;
  Tensor token_slots_;
  std::vector<int32_t> host_slots_;
  double load_seconds_ = 0.0;
  int num_slot_loads_ = 0;
  double slot_load_seconds_ = 0.0;
};

}  // namespace gs
