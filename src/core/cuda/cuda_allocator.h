// CudaAllocator: device memory from cudaMalloc, with the capture guard of core/allocator.h.
#pragma once
#include "core/allocator.h"

namespace gs {

class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int device = 0) : device_(device) {}
  Device device() const override { return Device::cuda(device_); }

 protected:
  void* do_allocate(size_t bytes) override;
  void do_deallocate(void* p, size_t bytes) override;

 private:
  int device_;
};

}  // namespace gs
