// OutputQueue: where the engine thread delivers one HTTP request's outputs and the HTTP
// thread reads them. One queue may carry several choices (n > 1, several prompts).
// A listener, when set, is called after each push (on the pushing thread: it must not block).
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
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
    std::function<void()> listener;
    {
      std::lock_guard lock(mu_);
      items_.push_back(std::move(item));
      listener = listener_;
    }
    cv_.notify_one();
    if (listener) listener();
  }
  void set_listener(std::function<void()> listener) {
    std::lock_guard lock(mu_);
    listener_ = std::move(listener);
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
  std::function<void()> listener_;
};

}  // namespace gs
