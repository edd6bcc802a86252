// Implements core/allocator.h (Allocator).
#include "core/allocator.h"

#include <cstdlib>
#include <new>

#include "core/error.h"

namespace gs {

void* Allocator::allocate(size_t bytes) {
  GS_CHECK(guard_ == 0,
           "allocation of {} bytes on {} during graph capture: everything a graph touches must be "
           "allocated before capture (persistent buffers)",
           bytes, device().str());
  void* p = do_allocate(bytes);
  in_use_ += bytes;
  if (in_use_ > peak_) peak_ = in_use_;
  return p;
}

void Allocator::deallocate(void* p, size_t bytes) {
  if (!p) return;
  do_deallocate(p, bytes);
  in_use_ -= bytes;
}

void* CpuAllocator::do_allocate(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (!p) fail("out of host memory allocating {} bytes", bytes);
  return p;
}

void CpuAllocator::do_deallocate(void* p, size_t) { std::free(p); }

}  // namespace gs
