// Implements server/response_store.h.
#include "server/response_store.h"

namespace gs {

void ResponseStore::put(const std::string& id, Entry entry) {
  if (capacity_ == 0) return;
  std::lock_guard lock(mu_);
  if (auto it = entries_.find(id); it != entries_.end()) {
    order_.erase(it->second.second);
    entries_.erase(it);
  }
  order_.push_front(id);
  entries_.emplace(id, std::make_pair(std::move(entry), order_.begin()));
  while (entries_.size() > capacity_) {
    entries_.erase(order_.back());
    order_.pop_back();
  }
}

std::optional<ResponseStore::Entry> ResponseStore::get(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  order_.splice(order_.begin(), order_, it->second.second);
  return it->second.first;
}

}  // namespace gs
