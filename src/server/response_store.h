// ResponseStore: the Responses API's stored responses (for `previous_response_id` and
// GET /v1/responses/{id}), in memory, bounded: past `capacity` the least recently used goes.
// Capacity 0 stores nothing. Thread-safe.
#pragma once
#include <nlohmann/json.hpp>

#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace gs {

class ResponseStore {
 public:
  struct Entry {
    nlohmann::json response;  // the response object as it was returned
    nlohmann::json messages;  // the conversation it ends (chat messages, its output last)
  };

  explicit ResponseStore(size_t capacity) : capacity_(capacity) {}
  size_t capacity() const { return capacity_; }
  bool enabled() const { return capacity_ > 0; }

  void put(const std::string& id, Entry entry);
  std::optional<Entry> get(const std::string& id);

 private:
  using Order = std::list<std::string>;  // most recently used first
  size_t capacity_;
  std::mutex mu_;
  Order order_;
  std::unordered_map<std::string, std::pair<Entry, Order::iterator>> entries_;
};

}  // namespace gs
