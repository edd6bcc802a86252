// OutputQueue: where the engine thread delivers one HTTP request's outputs and the HTTP
// thread reads them. One queue may carry several choices (n > 1, several prompts).
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

#include "engine/llm_engine.h"

namespace gs {

struct ChoiceOutput {
  int choice = 0;  // index of the choice within its HTTP request
  RequestOutput out;
};

class OutputQueue {
 public:
  void push(ChoiceOutput item) {
    {
      std::lock_guard lock(mu_);
      items_.push_back(std::move(item));
    }
    cv_.notify_one();
  }
  // The next output, or nullopt after `timeout` with none.
  std::optional<ChoiceOutput> pop(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return !items_.empty(); })) return std::nullopt;
    ChoiceOutput item = std::move(items_.front());
    items_.pop_front();
    return item;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ChoiceOutput> items_;
};

}  // namespace gs
