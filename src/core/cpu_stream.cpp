// Implements core/cpu_stream.h (CpuStream).
#include "core/cpu_stream.h"

#include "core/error.h"

namespace gs {

namespace {
class CpuGraph final : public Graph {
 public:
  explicit CpuGraph(std::vector<CpuStream::Kernel> kernels) : kernels_(std::move(kernels)) {}
  void replay() override {
    for (auto& k : kernels_) k();
  }
  size_t num_nodes() const override { return kernels_.size(); }

 private:
  std::vector<CpuStream::Kernel> kernels_;
};
}  // namespace

void CpuStream::launch(Kernel k) {
  if (capturing_) {
    recorded_.push_back(std::move(k));
  } else {
    k();
  }
}

void CpuStream::begin_capture() {
  GS_CHECK(!capturing_, "begin_capture: the stream is already capturing");
  capturing_ = true;
  recorded_.clear();
  if (guarded_) guarded_->raise_capture_guard();
}

std::unique_ptr<Graph> CpuStream::end_capture() {
  GS_CHECK(capturing_, "end_capture: the stream is not capturing");
  capturing_ = false;
  if (guarded_) guarded_->lower_capture_guard();
  return std::make_unique<CpuGraph>(std::move(recorded_));
}

}  // namespace gs
