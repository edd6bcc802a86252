// LoraCache: the LoRA adapters an engine serves, by name, and which of them the executor holds
// in host memory: vLLM's --max-cpu-loras, an LRU cache over every served adapter.
//
// Each served adapter has an id (never reused) and a PEFT directory. One that is not held is
// read again from its directory when a request names it (the caller may pass an image it read
// off the stepping thread). An adapter that a live request uses stays held until that request
// ends, beyond the capacity if need be; when the cache is over capacity, the least recently
// named adapters that no request uses are dropped. A removed adapter is no longer served and is
// dropped from host memory once its last request ends.
#pragma once
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "executor/executor.h"

namespace gs {

class LoraCache {
 public:
  // Serves `modules` (--lora-modules) as ids 1..n; the executor already holds the first
  // `capacity` of them (the runner read every one at start-up).
  LoraCache(Executor& exec, int capacity, const std::vector<std::pair<std::string, std::string>>& modules);

  // Served adapter names in load order (--lora-modules, then run-time loads).
  std::vector<std::string> names() const;
  // Served adapters held in host memory, in load order.
  std::vector<std::string> held_names() const;
  // The PEFT directory of served adapter `name`, or nullptr when `name` is not served.
  const std::string* path(const std::string& name) const;

  // The id of served adapter `name` for a new request, made held and most recently used:
  // from `image` if given, else read from its directory here. Adapters beyond the capacity that
  // no id of `in_use` names are dropped. Throws gs::Error for an unknown name or an adapter
  // that can no longer be read.
  int acquire(const std::string& name, std::shared_ptr<const LoraSlotImage> image, const std::set<int>& in_use);
  // Serves `image` (read from image->path) under `name` from the next step, held and most
  // recently used. Throws gs::Error for a name already served, or the executor's error when it
  // could not take the adapter (then `name` is not served).
  void add(const std::string& name, std::shared_ptr<const LoraSlotImage> image, const std::set<int>& in_use);
  // Stops serving `name` (throws gs::Error for an unknown name); its requests finish with it.
  void remove(const std::string& name, const std::set<int>& in_use);
  // Drops removed adapters no request uses, then the least recently used ones beyond the capacity.
  void collect(const std::set<int>& in_use);

 private:
  struct Entry {
    std::string name, path;
    int id = 0;
    bool held = false;
    bool served = true;      // false: removed, held until its last request ends
    uint64_t last_used = 0;  // LRU clock
  };
  Entry* find(const std::string& name);
  const Entry* find(const std::string& name) const;
  void hold(Entry& e, std::shared_ptr<const LoraSlotImage> image);
  void drop(Entry& e);

  Executor& exec_;
  int capacity_;
  std::vector<Entry> entries_;  // load order
  int next_id_ = 1;
  uint64_t clock_ = 0;
};

}  // namespace gs
