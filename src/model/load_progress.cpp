// Implements model/load_progress.h.
#include "model/load_progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "core/logging.h"

namespace gs {
namespace {

using Clock = std::chrono::steady_clock;

double gib(int64_t bytes) { return double(bytes) / double(1ull << 30); }

class ProgressSource : public WeightSource {
 public:
  ProgressSource(std::unique_ptr<WeightSource> inner, int64_t expected, int64_t weight_bytes)
      : inner_(std::move(inner)), expected_(expected), weight_bytes_(weight_bytes), tty_(isatty(STDERR_FILENO) == 1) {}

  void load(const std::string& name, const Shape& shape, const Tensor& dst, WeightInit init, int64_t fan_in,
            const WeightSlice& slice) override {
    inner_->load(name, shape, dst, init, fan_in, slice);
    loaded(dst.numel());
  }

  bool fill_gathered(const std::string& name, const Shape& shape, WeightInit init, int64_t fan_in, const SliceIndex& at,
                     const Tensor& dst) override {
    if (!inner_->fill_gathered(name, shape, init, fan_in, at, dst)) return false;
    loaded(dst.numel());
    return true;
  }

  std::vector<float> load_host(const std::string& name, const Shape& shape, WeightInit init, int64_t fan_in,
                               const WeightSlice& slice) override {
    std::vector<float> v = inner_->load_host(name, shape, init, fan_in, slice);
    bytes_ += static_cast<int64_t>(v.size()) * weight_bytes_;
    ++tensors_;
    return v;
  }

  std::optional<float> scalar(const std::string& name) override { return inner_->scalar(name); }

  void skip(const std::string& prefix) override { inner_->skip(prefix); }

  void finish() override {
    inner_->finish();
    if (tty_ && drawn_) std::fputs("\r\033[K", stderr);
    const double s = std::chrono::duration<double>(Clock::now() - start_).count();
    if (spdlog::default_logger_raw()->should_log(spdlog::level::info))
      spdlog::info("loaded {} tensors, {:.2f} GiB in {:.1f} s", tensors_, gib(bytes_), s);
  }

 private:
  // A tensor of `elems` elements written: counted, reported at most every 100 ms (1 s off a tty).
  void loaded(int64_t elems) {
    bytes_ += elems * weight_bytes_;
    ++tensors_;
    const auto now = Clock::now();
    if (now - last_ >= (tty_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(1000))) {
      last_ = now;
      report();
    }
  }

  void report() {
    if (!spdlog::default_logger_raw()->should_log(spdlog::level::info)) return;
    const double frac = expected_ > 0 ? std::min(1.0, double(bytes_) / double(expected_)) : 0.0;
    const std::string amount = expected_ > 0 ? fmt::format("{:.2f}/{:.2f} GiB", gib(bytes_), gib(expected_))
                                             : fmt::format("{:.2f} GiB", gib(bytes_));
    if (!tty_) {
      spdlog::info("loading weights: {:.0f}% {}, {} tensors", 100 * frac, amount, tensors_);
      return;
    }
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(frac * kWidth);
    std::fprintf(stderr, "\rloading weights [%s%s] %3.0f%% %s, %lld tensors\033[K", std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(), 100 * frac, amount.c_str(), (long long)tensors_);
    std::fflush(stderr);
    drawn_ = true;
  }

  std::unique_ptr<WeightSource> inner_;
  int64_t expected_, weight_bytes_;
  bool tty_;
  bool drawn_ = false;
  int64_t bytes_ = 0, tensors_ = 0;
  Clock::time_point start_ = Clock::now(), last_ = Clock::now();
};

}  // namespace

std::unique_ptr<WeightSource> with_load_progress(std::unique_ptr<WeightSource> inner, int64_t expected_bytes,
                                                 int64_t weight_bytes) {
  return std::make_unique<ProgressSource>(std::move(inner), expected_bytes, weight_bytes);
}

}  // namespace gs
