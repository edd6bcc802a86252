// Histogram: a cumulative Prometheus histogram over fixed upper bounds.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gs {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // Appends "_bucket{le=..}", "_sum" and "_count" lines for `name`; `labels` (e.g.
  // model_name="x") go on every line.
  void render(std::string& out, const std::string& name, const std::string& help, const std::string& labels = "") const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last one is +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

// Bounds for token counts per request or per engine step: 1, 2, 5, 10, 20, 50, ... up to 10^6
// (vLLM's 1-2-5 buckets).
std::vector<double> token_count_bounds();

}  // namespace gs
