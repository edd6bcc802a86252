// Implements engine/lora_cache.h (LoraCache).
#include "engine/lora_cache.h"

#include <algorithm>

#include "core/error.h"
#include "core/logging.h"
#include "model/lora_slots.h"

namespace gs {

LoraCache::LoraCache(Executor& exec, int capacity, const std::vector<std::pair<std::string, std::string>>& modules)
    : exec_(exec), capacity_(capacity) {
  for (const auto& [name, path] : modules) {
    const int id = next_id_++;
    entries_.push_back(Entry{name, path, id, id <= capacity_, true, 0});
  }
}

std::vector<std::string> LoraCache::names() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_)
    if (e.served) out.push_back(e.name);
  return out;
}

std::vector<std::string> LoraCache::held_names() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_)
    if (e.served && e.held) out.push_back(e.name);
  return out;
}

LoraCache::Entry* LoraCache::find(const std::string& name) {
  for (Entry& e : entries_)
    if (e.served && e.name == name) return &e;
  return nullptr;
}

const LoraCache::Entry* LoraCache::find(const std::string& name) const {
  return const_cast<LoraCache*>(this)->find(name);
}

const std::string* LoraCache::path(const std::string& name) const {
  const Entry* e = find(name);
  return e ? &e->path : nullptr;
}

void LoraCache::hold(Entry& e, std::shared_ptr<const LoraSlotImage> image) {
  if (!e.held) {
    if (!image) image = exec_.read_lora(e.name, e.path);
    exec_.add_lora(e.id, std::move(image));
    e.held = true;
  }
  e.last_used = ++clock_;
}

void LoraCache::drop(Entry& e) {
  exec_.remove_lora(e.id);
  e.held = false;
}

int LoraCache::acquire(const std::string& name, std::shared_ptr<const LoraSlotImage> image,
                       const std::set<int>& in_use) {
  Entry* e = find(name);
  if (e == nullptr) {
    std::string known;
    for (const std::string& n : names()) known += (known.empty() ? "" : ", ") + n;
    throw Error(fmt::format("unknown LoRA adapter '{}' (loaded: {})", name, known.empty() ? "none" : known));
  }
  const int id = e->id;
  try {
    hold(*e, std::move(image));
  } catch (const Error& ex) {
    throw Error(
        fmt::format("LoRA adapter '{}' is not in host memory (--max-cpu-loras {}) and could not be read "
                    "again from {}: {}",
                    name, capacity_, e->path, ex.what()));
  }
  std::set<int> keep = in_use;
  keep.insert(id);
  collect(keep);
  return id;
}

void LoraCache::add(const std::string& name, std::shared_ptr<const LoraSlotImage> image, const std::set<int>& in_use) {
  GS_CHECK(image != nullptr, "internal error: LoRA adapter '{}' without an image", name);
  GS_CHECK(find(name) == nullptr, "the LoRA adapter '{}' has already been loaded (unload it first)", name);
  entries_.push_back(Entry{name, image->path, next_id_++, false, true, 0});
  try {
    hold(entries_.back(), std::move(image));
  } catch (const Error&) {  // the executor holds nothing of it (tensor parallelism: a rank could not read it)
    entries_.pop_back();
    throw;
  }
  std::set<int> keep = in_use;
  keep.insert(entries_.back().id);
  collect(keep);
}

void LoraCache::remove(const std::string& name, const std::set<int>& in_use) {
  GS_CHECK(!name.empty(), "remove_lora_adapter: no adapter name given");
  Entry* e = find(name);
  GS_CHECK(e != nullptr, "unknown LoRA adapter '{}'", name);
  e->served = false;
  collect(in_use);
}

void LoraCache::collect(const std::set<int>& in_use) {
  for (Entry& e : entries_)
    if (!e.served && e.held && !in_use.contains(e.id)) drop(e);
  std::erase_if(entries_, [](const Entry& e) { return !e.served && !e.held; });
  int held = int(std::count_if(entries_.begin(), entries_.end(), [](const Entry& e) { return e.held; }));
  while (held > capacity_) {
    Entry* victim = nullptr;
    for (Entry& e : entries_)
      if (e.held && !in_use.contains(e.id) && (victim == nullptr || e.last_used < victim->last_used)) victim = &e;
    if (victim == nullptr) return;  // every held adapter has a live request: dropped once they end
    drop(*victim);
    --held;
  }
}

}  // namespace gs
