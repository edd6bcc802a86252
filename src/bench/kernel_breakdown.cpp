// Implements bench/kernel_breakdown.h.
#include "bench/kernel_breakdown.h"

#include <cxxabi.h>
#include <fmt/format.h>

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
  std::vector<KernelRecord> r = records;
  std::sort(r.begin(), r.end(), [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  std::map<std::string, KernelBreakdownRow> by_name;
  double total_us = 0, busy_us = 0;
  uint64_t frontier = 0;  // the latest end of the kernels started so far
  for (const auto& k : r) {
    GS_CHECK(k.end_ns >= k.start_ns, "kernel record {} ends before it starts", k.name);
    const uint64_t own_from = std::max(k.start_ns, frontier);
    const double own_us = k.end_ns > own_from ? double(k.end_ns - own_from) * 1e-3 : 0.0;
    frontier = std::max(frontier, k.end_ns);
    KernelBreakdownRow& row = by_name[short_kernel_name(k.name)];
    row.calls_per_step += 1;
    row.us_per_step += own_us;
    row.us_per_call += double(k.end_ns - k.start_ns) * 1e-3;
    total_us += double(k.end_ns - k.start_ns) * 1e-3;
    busy_us += own_us;
  }
  KernelBreakdown b{.steps = steps,
                    .wall_ms_per_step = wall_ms / steps,
                    .kernel_ms_per_step = total_us * 1e-3 / steps,
                    .busy_ms_per_step = busy_us * 1e-3 / steps};
  for (auto& [name, row] : by_name) {
    row.kernel = name;
    row.us_per_call /= row.calls_per_step;
    row.share = busy_us > 0 ? row.us_per_step / busy_us : 0;
    row.calls_per_step /= steps;
    row.us_per_step /= steps;
    b.rows.push_back(row);
  }
  std::sort(b.rows.begin(), b.rows.end(), [](const auto& x, const auto& y) { return x.us_per_step > y.us_per_step; });
  return b;
}

std::string format_kernel_breakdown(const KernelBreakdown& b, int batch_size, int top) {
  std::string s = fmt::format(
      "\nbatch {}: {} steps; per step: wall {:.3f} ms, kernels {:.3f} ms, GPU busy {:.3f} ms, idle {:.3f} ms\n",
      batch_size, b.steps, b.wall_ms_per_step, b.kernel_ms_per_step, b.busy_ms_per_step,
      std::max(0.0, b.wall_ms_per_step - b.busy_ms_per_step));
  s += fmt::format("{:>10} {:>7} {:>10} {:>7}  {}\n", "own us", "share", "calls", "us/call", "kernel");
  const size_t shown = std::min<size_t>(b.rows.size(), size_t(std::max(0, top)));
  for (size_t i = 0; i < shown; ++i) {
    const auto& r = b.rows[i];
    s += fmt::format("{:>10.1f} {:>6.1f}% {:>10.1f} {:>7.2f}  {}\n", r.us_per_step, 100 * r.share, r.calls_per_step,
                     r.us_per_call, r.kernel);
  }
  if (shown < b.rows.size()) {
    double us = 0, share = 0, calls = 0;
    for (size_t i = shown; i < b.rows.size(); ++i) {
      us += b.rows[i].us_per_step;
      share += b.rows[i].share;
      calls += b.rows[i].calls_per_step;
    }
    s += fmt::format("{:>10.1f} {:>6.1f}% {:>10.1f} {:>7}  ({} other kernels)\n", us, 100 * share, calls, "",
                     b.rows.size() - shown);
  }
  return s;
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
