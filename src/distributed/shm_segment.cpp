// ShmSegment: shm_open + mmap, and a sense-counting barrier on futexes (process-shared).
#include "distributed/shm_segment.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <thread>

#include "core/error.h"

namespace gs {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Opens (rank 0: creates) the segment's file descriptor.
int open_segment(const std::string& name, int rank, size_t bytes, double timeout_s) {
  if (rank == 0) {
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    GS_CHECK(fd >= 0, "shared-memory group {}: shm_open failed: {} (is /dev/shm mounted and writable?)", name,
             std::strerror(errno));
    if (ftruncate(fd, off_t(bytes)) != 0) {
      const int e = errno;
      close(fd);
      shm_unlink(name.c_str());
      fail("shared-memory group {}: cannot size it to {} bytes: {}", name, bytes, std::strerror(e));
    }
    return fd;
  }
  const auto t0 = Clock::now();
  for (;;) {
    const int fd = shm_open(name.c_str(), O_RDWR, 0600);
    struct stat st {};
    if (fd >= 0 && fstat(fd, &st) == 0 && size_t(st.st_size) == bytes) return fd;
    if (fd >= 0) close(fd);
    GS_CHECK(seconds_since(t0) < timeout_s,
             "shared-memory group {}: rank 0 did not create it within {:.0f} s (did rank 0 start?)", name, timeout_s);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int ms) {
  timespec ts{ms / 1000, long(ms % 1000) * 1000000L};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

ShmSegment::ShmSegment(const std::string& name, int rank, int world, size_t slot_bytes, double timeout_s)
    : name_(name),
      rank_(rank),
      world_(world),
      slot_bytes_(slot_bytes),
      total_bytes_(kHeaderBytes + size_t(world) * slot_bytes),
      timeout_s_(timeout_s) {
  GS_CHECK(world >= 1 && rank >= 0 && rank < world, "shared-memory group {}: rank {} outside [0, {})", name, rank,
           world);
  static_assert(sizeof(Header) <= kHeaderBytes);
  const int fd = open_segment(name, rank, total_bytes_, timeout_s);
  void* p = mmap(nullptr, total_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  GS_CHECK(p != MAP_FAILED, "shared-memory group {}: mmap of {} bytes failed: {}", name, total_bytes_,
           std::strerror(errno));
  base_ = static_cast<uint8_t*>(p);  // a fresh segment is zero: no arrivals, generation 0, not failed
}

ShmSegment::~ShmSegment() {
  // Destroyed by an exception (this rank failed): its peers must not wait for it.
  if (std::uncaught_exceptions() > 0) mark_failed();
  munmap(base_, total_bytes_);
  unlink_name();
}

void ShmSegment::unlink_name() const {
  if (rank_ == 0) shm_unlink(name_.c_str());
}

void ShmSegment::mark_failed() {
  header()->failed.store(1, std::memory_order_release);
  futex_wake_all(&header()->generation);  // waiters see `failed` (or time out of their 50 ms waits)
}

void ShmSegment::wait_generation(uint32_t gen, const char* what) {
  Header* h = header();
  const auto t0 = Clock::now();
  for (int spin = 0; h->generation.load(std::memory_order_acquire) == gen; ++spin) {
    if (spin < 64) continue;
    futex_wait(&h->generation, gen, 50);
    GS_CHECK(!h->failed.load(std::memory_order_acquire),
             "tensor-parallel {}: another rank of the group failed (see its error); rank {} stops", what, rank_);
    if (seconds_since(t0) > timeout_s_) {
      mark_failed();
      fail("tensor-parallel {}: rank {} waited {:.0f} s for its {} peers (a worker died or hung); giving up", what,
           rank_, timeout_s_, world_ - 1);
    }
  }
}

void ShmSegment::barrier(const char* what) {
  Header* h = header();
  GS_CHECK(!h->failed.load(std::memory_order_acquire),
           "tensor-parallel {}: another rank of the group failed (see its error); rank {} stops", what, rank_);
  const uint32_t gen = h->generation.load(std::memory_order_acquire);
  if (h->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == uint32_t(world_)) {
    h->arrived.store(0, std::memory_order_relaxed);
    h->generation.fetch_add(1, std::memory_order_release);
    futex_wake_all(&h->generation);
    return;
  }
  wait_generation(gen, what);
}

}  // namespace gs
