// Implements server/histogram.h.
#include "server/histogram.h"

#include <fmt/format.h>

#include <algorithm>

namespace gs {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help,
                       const std::string& labels) const {
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  const std::string pre = labels.empty() ? "" : labels + ",";
  const std::string only = labels.empty() ? "" : "{" + labels + "}";
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{{{}le=\"{}\"}} {}\n", name, pre, bounds_[i], cum);
  }
  out += fmt::format("{}_bucket{{{}le=\"+Inf\"}} {}\n", name, pre, count_);
  out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, only, sum_, name, only, count_);
}

std::vector<double> token_count_bounds() {
  std::vector<double> b;
  for (double p = 1; p <= 1e6; p *= 10)
    for (double m : {1.0, 2.0, 5.0}) b.push_back(m * p);
  return b;
}

}  // namespace gs
