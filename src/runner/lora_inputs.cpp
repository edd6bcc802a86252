// LoraInputs: adapters in host memory, LRU device slots, the per-token slot buffer; and the
// ModelRunner's run-time adapter calls, which forward to it.
#include "runner/lora_inputs.h"

#include <algorithm>

#include "core/error.h"
#include "core/logging.h"
#include "runner/model_runner_impl.h"

namespace gs {

LoraInputs::LoraInputs(const RunnerConfig& cfg, const ModelConfig& mcfg, const TpLayout& tp, Backend& backend,
                       int max_num_tokens)
    : mcfg_(mcfg), tp_(tp), max_rank_(cfg.max_lora_rank), be_(backend) {
  const auto t0 = std::chrono::steady_clock::now();
  slots_ = std::make_unique<LoraSlots>(tp.local, backend, cfg.max_loras, cfg.max_lora_rank, max_num_tokens);
  for (size_t i = 0; i < cfg.lora_modules.size(); ++i) {  // every one is checked; the first ones are kept
    auto image = read(cfg.lora_modules[i].first, cfg.lora_modules[i].second);
    if (int(i) < cfg.lora_host_capacity()) add(int(i) + 1, std::move(image));
  }
  load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  slot_owner_.assign(size_t(cfg.max_loras), 0);
  slot_used_.assign(size_t(cfg.max_loras), 0);
  token_slots_ = Tensor::empty({max_num_tokens}, DType::I32, backend.allocator());
  host_slots_.assign(size_t(max_num_tokens), -1);
  be_.copy(token_slots_, Tensor::wrap(host_slots_.data(), {max_num_tokens}, DType::I32, Device::cpu()));
  be_.stream().synchronize();
  spdlog::info("LoRA: {} adapters read and checked in {:.3f} s ({} kept in host memory), {} device slots of rank {}",
               cfg.lora_modules.size(), load_seconds_, images_.size(), cfg.max_loras, cfg.max_lora_rank);
}

LoraInputs::~LoraInputs() {
  if (num_slot_loads_ > 0)
    spdlog::info("LoRA: {} slot loads (host -> device), {:.3f} ms each on average", num_slot_loads_,
                 1e3 * slot_load_seconds_ / num_slot_loads_);
}

std::shared_ptr<const LoraSlotImage> LoraInputs::read(const std::string& name, const std::string& path) const {
  LoraSlotImage image =
      slots_->prepare(shard_lora_adapter(load_lora_adapter(name, path, mcfg_, max_rank_), mcfg_, tp_));
  image.path = path;
  return std::make_shared<const LoraSlotImage>(std::move(image));
}

void LoraInputs::add(int lora_id, std::shared_ptr<const LoraSlotImage> image) {
  GS_CHECK(lora_id >= 1 && image, "internal error: LoRA adapter id {} without an image", lora_id);
  GS_CHECK(!images_.contains(lora_id), "internal error: LoRA adapter id {} is in use", lora_id);
  images_.emplace(lora_id, std::move(image));
}

void LoraInputs::remove(int lora_id) {
  GS_CHECK(images_.erase(lora_id) == 1, "internal error: LoRA adapter id {} is not loaded", lora_id);
  for (int& owner : slot_owner_)
    if (owner == lora_id) owner = 0;  // no token points at it any more: the slot is free
}

bool LoraInputs::any_adapter(const SchedulerOutput& batch) {
  return std::any_of(batch.requests.begin(), batch.requests.end(), [](const auto& r) { return r.lora_id != 0; });
}

int LoraInputs::slot_for(int lora_id, const std::vector<int>& needed) {
  const auto image = images_.find(lora_id);
  GS_CHECK(image != images_.end(), "LoRA adapter id {} is not loaded ({} adapters)", lora_id, images_.size());
  for (size_t s = 0; s < slot_owner_.size(); ++s)
    if (slot_owner_[s] == lora_id) return int(s);
  int victim = -1;  // an empty slot, else the least recently used one this batch does not need
  for (size_t s = 0; s < slot_owner_.size(); ++s) {
    if (std::find(needed.begin(), needed.end(), slot_owner_[s]) != needed.end()) continue;
    if (victim < 0 || slot_owner_[s] == 0 ||
        (slot_owner_[size_t(victim)] != 0 && slot_used_[s] < slot_used_[size_t(victim)]))
      victim = int(s);
    if (slot_owner_[s] == 0) break;
  }
  GS_CHECK(victim >= 0, "a batch needs more than --max-loras {} adapters", slot_owner_.size());
  const auto t0 = std::chrono::steady_clock::now();
  slots_->load(victim, *image->second);
  slot_load_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++num_slot_loads_;
  slot_owner_[size_t(victim)] = lora_id;
  return victim;
}

void LoraInputs::stage(const SchedulerOutput& batch, int num_tokens) {
  ++step_;
  std::vector<int> needed;
  for (const auto& r : batch.requests)
    if (r.lora_id != 0 && std::find(needed.begin(), needed.end(), r.lora_id) == needed.end())
      needed.push_back(r.lora_id);
  GS_CHECK(int(host_slots_.size()) >= num_tokens, "LoRA: {} tokens exceed the slot buffer", num_tokens);
  int t = 0;
  for (const auto& r : batch.requests) {
    int slot = -1;
    if (r.lora_id != 0) {
      slot = slot_for(r.lora_id, needed);
      slot_used_[size_t(slot)] = step_;
    }
    for (int i = 0; i < r.num_new_tokens; ++i) host_slots_[size_t(t++)] = slot;
  }
  std::fill(host_slots_.begin() + t, host_slots_.begin() + std::max(t, num_tokens), -1);
  be_.copy(token_slots_.prefix({num_tokens}),
           Tensor::wrap(host_slots_.data(), {num_tokens}, DType::I32, Device::cpu()));
}

namespace {
LoraInputs& lora_of(ModelRunner::Impl& impl) {
  GS_CHECK(impl.lora != nullptr, "LoRA is not enabled: start with --enable-lora to load adapters");
  return *impl.lora;
}
}  // namespace

std::shared_ptr<const LoraSlotImage> ModelRunner::read_lora(const std::string& name, const std::string& path) const {
  return lora_of(*impl_).read(name, path);
}
void ModelRunner::add_lora(int id, std::shared_ptr<const LoraSlotImage> image) {
  lora_of(*impl_).add(id, std::move(image));
}
void ModelRunner::remove_lora(int id) { lora_of(*impl_).remove(id); }

}  // namespace gs
