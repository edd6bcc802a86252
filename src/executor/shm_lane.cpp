// ShmLane: two single-slot mailboxes in a ShmSegment of two "ranks" (0: driver, 1: worker).
#include "executor/shm_lane.h"

#include <unistd.h>

#include <cstring>
#include <random>

namespace gs {

ShmLane::ShmLane(const std::string& name, int side, double timeout_s)
    : name_(name),
      seg_(name, side, 2, kHeaderBytes + kCapacity, timeout_s),
      out_(reinterpret_cast<Mailbox*>(seg_.slot(side))),
      in_(reinterpret_cast<Mailbox*>(seg_.slot(1 - side))) {
  static_assert(sizeof(Mailbox) <= kHeaderBytes);
  static_assert(std::atomic<uint32_t>::is_always_lock_free);
}

std::string ShmLane::make_name() {
  std::random_device rd;
  return "/graphserve-lane-" + std::to_string(getpid()) + "-" + std::to_string(rd()) + std::to_string(rd());
}

bool ShmLane::post(MsgType type, const std::string& payload) {
  const uint32_t n = out_->posted.load(std::memory_order_relaxed);
  if (payload.size() > kCapacity || out_->taken.load(std::memory_order_acquire) != n) return false;
  out_->type = uint32_t(type);
  out_->size = payload.size();
  std::memcpy(data(out_), payload.data(), payload.size());
  out_->posted.store(n + 1, std::memory_order_seq_cst);  // publishes the message, then looks for a sleeper
  if (out_->sleeping.load(std::memory_order_seq_cst) != 0) futex_wake_all(&out_->posted);
  return true;
}

bool ShmLane::has_message() const {
  return in_->posted.load(std::memory_order_acquire) != in_->taken.load(std::memory_order_relaxed);
}

std::optional<Message> ShmLane::take() {
  const uint32_t n = in_->posted.load(std::memory_order_acquire);
  if (n == in_->taken.load(std::memory_order_relaxed)) return std::nullopt;
  Message m{MsgType(in_->type), std::string(reinterpret_cast<const char*>(data(in_)), size_t(in_->size))};
  in_->taken.store(n, std::memory_order_release);  // the sender may post the next one
  return m;
}

void ShmLane::sleep(int ms) {
  const uint32_t n = in_->taken.load(std::memory_order_relaxed);
  in_->sleeping.store(1, std::memory_order_seq_cst);
  if (in_->posted.load(std::memory_order_seq_cst) == n) futex_wait(&in_->posted, n, ms);
  in_->sleeping.store(0, std::memory_order_relaxed);
}

}  // namespace gs
