// ShmSegment: a named POSIX shared-memory segment holding a group's barrier and per-rank slots,
// mapped by every rank (threads or processes of one host).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace gs {

// Process-shared futex on a word of a shared mapping: waits while *word == expected, at most ms
// milliseconds (spurious wake-ups are fine); wakes every waiter.
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int ms);
void futex_wake_all(std::atomic<uint32_t>* word);

class ShmSegment {
 public:
  // Rank 0 creates the segment (and unlinks its name when destroyed); other ranks wait up to
  // timeout_s for it to appear. slot_bytes is each rank's exchange slot.
  ShmSegment(const std::string& name, int rank, int world, size_t slot_bytes, double timeout_s);
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  uint8_t* slot(int r) const { return base_ + kHeaderBytes + size_t(r) * slot_bytes_; }
  size_t slot_bytes() const { return slot_bytes_; }

  // Returns when every rank called it. Throws gs::Error (and marks the group failed, so the
  // others throw at once) when a peer does not arrive in time or the group already failed.
  void barrier(const char* what);
  // Marks the group failed: every rank's next (or current) barrier throws.
  void mark_failed();
  // Removes the segment's name (rank 0; every rank mapped it): nothing is left behind if a
  // process is killed. The destructor does it otherwise.
  void unlink_name() const;

 private:
  struct Header {
    std::atomic<uint32_t> arrived;
    std::atomic<uint32_t> generation;  // futex word: bumped when the last rank arrives
    std::atomic<uint32_t> failed;
  };
  static constexpr size_t kHeaderBytes = 256;

  Header* header() const { return reinterpret_cast<Header*>(base_); }
  void wait_generation(uint32_t gen, const char* what);

  std::string name_;
  int rank_, world_;
  size_t slot_bytes_, total_bytes_;
  double timeout_s_;
  uint8_t* base_ = nullptr;
};

}  // namespace gs
