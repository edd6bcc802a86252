// Implements runner/kernel_breakdown.h.
#include "runner/kernel_breakdown.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "core/error.h"
#if GS_HAVE_CUPTI
#include "core/cuda/cupti_profiler.h"
#endif

namespace gs {

namespace {

std::string demangle(const std::string& name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !d) return name;
  std::string out(d);
  std::free(d);
  return out;
}

// `s` without its parameter list: everything from the first '(' outside template brackets.
std::string drop_parameters(const std::string& s) {
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') ++depth;
    if (s[i] == '>') --depth;
    if (s[i] == '(' && depth == 0 && s.compare(i, 21, "(anonymous namespace)") != 0) return s.substr(0, i);
  }
  return s;
}

void erase_all(std::string& s, const std::string& what) {
  for (size_t p; (p = s.find(what)) != std::string::npos;) s.erase(p, what.size());
}

// Milliseconds during which at least one interval of the sorted `records` runs.
double busy_ms(std::vector<KernelRecord> r) {
  std::sort(r.begin(), r.end(), [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  uint64_t busy = 0, cur_start = 0, cur_end = 0;
  for (const auto& k : r) {
    if (k.start_ns > cur_end) {
      busy += cur_end - cur_start;
      cur_start = k.start_ns;
      cur_end = k.end_ns;
    } else {
      cur_end = std::max(cur_end, k.end_ns);
    }
  }
  return double(busy + (cur_end - cur_start)) * 1e-6;
}

}  // namespace

std::string short_kernel_name(const std::string& device_name) {
  std::string s = drop_parameters(demangle(device_name));
  if (s.rfind("void ", 0) == 0) s.erase(0, 5);
  erase_all(s, "(anonymous namespace)::");
  erase_all(s, "gs::cuda::");
  erase_all(s, "gs::");
  if (s.size() > 90) s = s.substr(0, 87) + "...";
  return s;
}

KernelBreakdown summarize_kernels(const std::vector<KernelRecord>& records, int steps, double wall_ms) {
  GS_CHECK(steps > 0, "a kernel breakdown needs at least one step, got {}", steps);
  KernelBreakdown b;
  b.steps = steps;
  b.wall_ms_per_step = wall_ms / steps;
  std::map<std::string, KernelBreakdownRow> by_name;
  double total_us = 0;
  uint64_t first = UINT64_MAX, last = 0;
  for (const auto& k : records) {
    GS_CHECK(k.end_ns >= k.start_ns, "kernel record {} ends before it starts", k.name);
    const double us = double(k.end_ns - k.start_ns) * 1e-3;
    KernelBreakdownRow& row = by_name[short_kernel_name(k.name)];
    row.calls_per_step += 1;
    row.us_per_step += us;
    total_us += us;
    first = std::min(first, k.start_ns);
    last = std::max(last, k.end_ns);
  }
  for (auto& [name, row] : by_name) {
    row.kernel = name;
    row.us_per_call = row.us_per_step / row.calls_per_step;
    row.share = total_us > 0 ? row.us_per_step / total_us : 0;
    row.calls_per_step /= steps;
    row.us_per_step /= steps;
    b.rows.push_back(row);
  }
  std::sort(b.rows.begin(), b.rows.end(), [](const auto& x, const auto& y) { return x.us_per_step > y.us_per_step; });
  b.kernel_ms_per_step = total_us * 1e-3 / steps;
  b.busy_ms_per_step = records.empty() ? 0 : busy_ms(records) / steps;
  b.span_ms_per_step = records.empty() ? 0 : double(last - first) * 1e-6 / steps;
  return b;
}

std::unique_ptr<KernelProfiler> make_kernel_profiler(std::string* why_not) {
#if GS_HAVE_CUPTI
  return make_cupti_profiler(why_not);
#else
  if (why_not) *why_not = "this build has no CUPTI (a CUDA backend built with the toolkit's cupti.h)";
  return nullptr;
#endif
}

}  // namespace gs
