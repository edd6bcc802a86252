// CpuStream: the CPU backend's stream. Kernels are closures; capture records them.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "core/allocator.h"
#include "core/stream.h"

namespace gs {

class CpuStream final : public Stream {
 public:
  using Kernel = std::function<void()>;

  // `guarded` (optional) is the allocator whose capture guard is raised while capturing.
  explicit CpuStream(Allocator* guarded = nullptr) : guarded_(guarded) {}

  // Runs `k` now, or records it when capturing. `k` must capture only raw pointers and sizes.
  void launch(Kernel k);

  Device device() const override { return Device::cpu(); }
  void begin_capture() override;
  std::unique_ptr<Graph> end_capture() override;
  bool capturing() const override { return capturing_; }
  void synchronize() override {}

 private:
  Allocator* guarded_;
  bool capturing_ = false;
  std::vector<Kernel> recorded_;
};

}  // namespace gs
