// Allocator: device memory with accounting and a capture guard.
//
// Graph capture bakes addresses in, so nothing may allocate while a stream captures: the
// stream raises the guard for the duration of a capture and allocate() then throws.
#pragma once
#include <cstddef>
#include <memory>

#include "core/device.h"

namespace gs {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;

  void* allocate(size_t bytes);  // throws gs::Error while the capture guard is raised
  void deallocate(void* p, size_t bytes);

  size_t bytes_in_use() const { return in_use_; }
  size_t peak_bytes() const { return peak_; }

  void raise_capture_guard() { ++guard_; }
  void lower_capture_guard() { --guard_; }
  bool capture_guard_raised() const { return guard_ > 0; }

 protected:
  virtual void* do_allocate(size_t bytes) = 0;
  virtual void do_deallocate(void* p, size_t bytes) = 0;

 private:
  size_t in_use_ = 0;
  size_t peak_ = 0;
  int guard_ = 0;
};

// Host memory, 64-byte aligned.
class CpuAllocator final : public Allocator {
 public:
  Device device() const override { return Device::cpu(); }

 protected:
  void* do_allocate(size_t bytes) override;
  void do_deallocate(void* p, size_t bytes) override;
};

}  // namespace gs
